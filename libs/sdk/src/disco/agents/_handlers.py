"""Checking handlers when a decorator is applied, and converting what they take and return."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast, get_args, get_origin

from pydantic import BaseModel, JsonValue, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from disco.agents._errors import HandlerSignatureError
from disco_common.tasks import ErrorInfo

__all__ = ["HandlerSpec", "describe", "error_info", "inspect_handler", "to_json"]

_MISSING = inspect.Parameter.empty


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """What a handler looks like: how many arguments it takes and what types drive validation."""

    func: Callable[..., Any]
    takes_context: bool
    first_annotation: Any
    """The first parameter's resolved annotation (``inspect.Parameter.empty`` if none)."""
    input_model: type[BaseModel] | None
    """A pydantic model the input data is validated into, if the annotations name one."""
    model_as_argument: bool
    """Whether the handler takes that model directly (rather than a context carrying it)."""
    return_adapter: TypeAdapter[Any] | None
    """Validates and dumps the return value, from the return annotation."""
    return_annotation: Any

    async def call(self, argument: Any, context: Any) -> Any:
        """Call the handler with ``argument``, and with ``context`` when it takes one."""
        if self.takes_context:
            return await self.func(argument, context)
        return await self.func(argument)


def describe(func: Callable[..., Any]) -> str:
    """``module.qualname`` of a handler, for messages."""
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    module = getattr(func, "__module__", None)
    return f"{module}.{name}" if module else name


def _resolved_hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except NameError as exc:
        raise HandlerSignatureError(
            f"cannot resolve the type hints of {describe(func)} ({exc}): define the models it "
            "names at module level (or import them) so the decorator can read them"
        ) from None


def inspect_handler(
    func: Callable[..., Any],
    *,
    decorator: str,
    first: str,
    context_types: tuple[type, ...],
    allow_model_argument: bool = False,
    check_return: bool = False,
) -> HandlerSpec:
    """Check ``func`` for ``decorator`` and describe it.

    The handler must be ``async def`` taking ``first`` (one of ``context_types``,
    or a pydantic model when ``allow_model_argument``) and optionally the
    :class:`PlatformContext`; no other required parameters.

    Raises:
        HandlerSignatureError: with the signature expected.
    """
    expected = f"async def handler({first}, context: PlatformContext)"
    if not callable(func):
        raise HandlerSignatureError(f"@{decorator} decorates a function; got {func!r}")
    if not inspect.iscoroutinefunction(func):
        raise HandlerSignatureError(
            f"{describe(func)} must be `async def` for @{decorator}: write `{expected}`"
        )
    signature = inspect.signature(func)
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    required_keyword = [
        p
        for p in signature.parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.default is _MISSING
    ]
    required_positional = [p for p in positional if p.default is _MISSING]
    if required_keyword or not 1 <= len(required_positional) <= 2 or not positional:
        raise HandlerSignatureError(
            f"{describe(func)} has the signature {signature}, which @{decorator} cannot call: "
            f"write `{expected}` (the context parameter is optional)"
        )
    takes_context = len(positional) >= 2
    hints = _resolved_hints(func)
    first_annotation = hints.get(positional[0].name, _MISSING)
    input_model: type[BaseModel] | None = None
    model_as_argument = False
    if first_annotation is not _MISSING and first_annotation is not Any:
        origin = get_origin(first_annotation) or first_annotation
        if inspect.isclass(origin) and issubclass(origin, context_types):
            args = get_args(first_annotation)
            if args and inspect.isclass(args[0]) and issubclass(args[0], BaseModel):
                input_model = args[0]
        elif (
            allow_model_argument
            and inspect.isclass(first_annotation)
            and issubclass(first_annotation, BaseModel)
        ):
            input_model = first_annotation
            model_as_argument = True
        else:
            allowed = " or ".join(t.__name__ for t in context_types)
            if allow_model_argument:
                allowed += " or a pydantic model of the request data"
            raise HandlerSignatureError(
                f"the first parameter of {describe(func)} is annotated {first_annotation!r}, "
                f"but @{decorator} passes {allowed}: write `{expected}`"
            )
    return_annotation = hints.get("return", _MISSING)
    return_adapter: TypeAdapter[Any] | None = None
    if check_return and return_annotation not in (_MISSING, Any, None, type(None)):
        try:
            return_adapter = TypeAdapter(return_annotation)
        except Exception as exc:
            raise HandlerSignatureError(
                f"the return annotation {return_annotation!r} of {describe(func)} is not a type "
                f"pydantic can validate ({exc}); return JSON data or a pydantic model"
            ) from None
    return HandlerSpec(
        func=func,
        takes_context=takes_context,
        first_annotation=first_annotation,
        input_model=input_model,
        model_as_argument=model_as_argument,
        return_adapter=return_adapter,
        return_annotation=return_annotation,
    )


def to_json(value: Any, adapter: TypeAdapter[Any] | None = None) -> Any:
    """A handler's return value as JSON data (validated by ``adapter`` when given)."""
    if adapter is not None:
        return adapter.dump_python(adapter.validate_python(value), mode="json")
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return to_jsonable_python(value)


def error_info(exc: BaseException) -> ErrorInfo:
    """The :class:`ErrorInfo` an exception becomes in a result; validation errors list problems."""
    if isinstance(exc, ValidationError):
        problems = [
            {
                "loc": ".".join(str(part) for part in error["loc"]),
                "msg": error["msg"],
                "type": error["type"],
            }
            for error in exc.errors(include_url=False, include_input=False)
        ]
        summary = "; ".join(f"{p['loc'] or 'data'}: {p['msg']}" for p in problems[:10])
        return ErrorInfo(
            type="ValidationError",
            message=f"the request data is not valid for {exc.title}: {summary}"[:4000],
            details={"errors": cast(list[JsonValue], problems[:100])},
        )
    return ErrorInfo.from_exception(exc)
