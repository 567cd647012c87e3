"""Tools an LLM agent may call: typed Python functions, with an approval policy each.

The JSON Schema the model sees comes from the function's type hints (through a
pydantic model of its parameters); the model's arguments are validated against
that model before the call, and a validation error goes back to the model as
the tool's result instead of failing the execution. Sync functions run in a
worker thread so they never block the event loop.

A tool may also come with its JSON Schema and an async function of the
arguments (:meth:`AgentTool.from_schema`), and tools may come from a
:class:`ToolSource` (the tools of an MCP server, :mod:`disco.runtime.mcp`),
which the runner asks for them when it runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import (
    Any,
    Literal,
    Protocol,
    TypeVar,
    cast,
    get_type_hints,
    overload,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from disco.runtime._drivers import ToolSpec
from disco.runtime._json_safe import to_json_safe
from disco_common.registry import validate_payload

__all__ = [
    "AgentTool",
    "ApprovalPolicy",
    "ToolArgumentsError",
    "ToolSource",
    "Toolbox",
    "agent_tool",
    "tool_log",
]

ApprovalPolicy = Literal["always", "never"] | bool | Callable[[dict[str, Any]], bool]
"""When a call needs a person's approval: always, never, or a function of its arguments."""

Redaction = Sequence[str] | Callable[[dict[str, Any]], Any] | None
"""What an approver sees of the arguments: names to mask, or a function of the arguments."""

FunctionT = TypeVar("FunctionT", bound=Callable[..., Any])

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_REDACTED = "[redacted]"


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool (sent back to the model as the result)."""


@dataclass(frozen=True, slots=True)
class _LogSink:
    tool_call_id: str
    tool_name: str
    write: Callable[[str, str, str, str], None]


_current_call: contextvars.ContextVar[_LogSink | None] = contextvars.ContextVar(
    "disco_runtime_tool_call", default=None
)


def tool_log(message: str, *, level: str = "info") -> None:
    """Write a diagnostic line from inside a tool (published as ``TOOL_LOG``).

    Works in async and sync tools; outside a tool call it does nothing.
    """
    sink = _current_call.get()
    if sink is not None:
        sink.write(sink.tool_call_id, sink.tool_name, level, str(message))


def _first_paragraph(text: str | None) -> str:
    if not text:
        return ""
    return inspect.cleandoc(text).split("\n\n", 1)[0].strip()


class AgentTool:
    """A Python function the model may call.

    Build one with :func:`agent_tool` (a decorator) or ``AgentTool(function)``.

    Args:
        function: a sync or async function; its parameters (with type hints)
            are the tool's arguments.
        name: what the model calls it (default: the function's name).
        description: what the model reads (default: the docstring's first paragraph).
        approval: ``"never"`` (default), ``"always"``, or a function of the
            (validated) arguments returning whether this call needs approval.
        redact: what approvers and UIs see of the arguments: names of
            arguments to mask, or a function of the arguments returning what to show.

    Raises:
        TypeError: a parameter without a type hint, ``*args``/``**kwargs``, or a
            bad name or policy.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        approval: ApprovalPolicy = "never",
        redact: Redaction = None,
    ) -> None:
        self.function = function
        self._named(
            name or str(getattr(function, "__name__", "")),
            description if description is not None else _first_paragraph(function.__doc__),
            approval,
            redact,
        )
        self.is_async = inspect.iscoroutinefunction(function)
        self.arguments_model = _arguments_model(function, self.name)
        schema = self.arguments_model.model_json_schema()
        schema.pop("title", None)
        self.parameters: dict[str, Any] = schema

    def _named(
        self, name: str, description: str, approval: ApprovalPolicy, redact: Redaction
    ) -> None:
        self.name: str = name
        if not _NAME.fullmatch(self.name):
            raise TypeError(
                f"tool name {self.name!r} is not valid: 1-64 letters, digits, '_' or '-' "
                "(what model APIs accept)"
            )
        self.description = description
        if not (
            approval in ("always", "never") or isinstance(approval, bool) or callable(approval)
        ):
            raise TypeError(
                f"approval for tool {self.name!r} must be 'always', 'never', a bool or a function "
                f"of the arguments, got {approval!r}"
            )
        self.approval = approval
        self.redact = redact

    @classmethod
    def from_schema(
        cls,
        name: str,
        call: Callable[[dict[str, Any]], Awaitable[Any]],
        *,
        parameters: Mapping[str, Any],
        description: str = "",
        approval: ApprovalPolicy = "never",
        redact: Redaction = None,
    ) -> AgentTool:
        """A tool whose arguments follow the JSON Schema ``parameters``, run by ``call``.

        For tools described elsewhere (an MCP server's): the arguments are checked
        against the schema, then ``call`` gets them as a dict.

        Raises:
            TypeError: a bad name or policy.
        """
        return _SchemaTool(name, call, parameters, description, approval, redact)

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r}, approval={self.approval!r})"

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    @property
    def may_need_approval(self) -> bool:
        """Whether any call of this tool could need approval."""
        return self.approval not in ("never", False)

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """The arguments checked against the tool's parameters.

        Raises:
            ToolArgumentsError: they do not fit (every problem listed).
        """
        try:
            return self.arguments_model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or '(arguments)'}: {error['msg']}"
                for error in exc.errors(include_url=False)
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}") from None

    def needs_approval(self, arguments: BaseModel) -> bool:
        """Whether this call (with validated ``arguments``) waits for a person's approval."""
        if self.approval in ("always", True):
            return True
        if self.approval in ("never", False):
            return False
        policy = cast(Callable[[dict[str, Any]], bool], self.approval)
        return bool(policy(arguments.model_dump()))

    def shown_arguments(self, arguments: Mapping[str, Any]) -> Any:
        """The arguments as approvers and UIs see them (redacted, JSON-safe)."""
        values = dict(arguments)
        if self.redact is None:
            shown: Any = values
        elif callable(self.redact):
            shown = self.redact(values)
        else:
            shown = {
                key: (_REDACTED if key in self.redact else value) for key, value in values.items()
            }
        return to_json_safe(shown, max_bytes=16 * 1024)

    async def invoke(self, arguments: BaseModel) -> Any:
        """Call the function with validated ``arguments`` (a sync one in a thread)."""
        values = {name: getattr(arguments, name) for name in type(arguments).model_fields}
        if self.is_async:
            return await self.function(**values)
        context = contextvars.copy_context()
        return await asyncio.to_thread(context.run, functools.partial(self.function, **values))


class _Arguments(BaseModel):
    """Arguments checked against a JSON Schema: kept as they came."""

    model_config = ConfigDict(extra="allow")


class _SchemaTool(AgentTool):
    """:meth:`AgentTool.from_schema`."""

    def __init__(
        self,
        name: str,
        call: Callable[[dict[str, Any]], Awaitable[Any]],
        parameters: Mapping[str, Any],
        description: str,
        approval: ApprovalPolicy,
        redact: Redaction,
    ) -> None:
        self.function = call
        self._named(name, description, approval, redact)
        self.is_async = True
        self.arguments_model = _Arguments
        self.parameters = dict(parameters)

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        checked = validate_payload(self.parameters, dict(arguments))
        if not checked.valid:
            problems = "; ".join(
                f"{v.path.lstrip('/').replace('/', '.') or '(arguments)'}: {v.message}"
                for v in checked.violations
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}")
        return _Arguments.model_validate(dict(arguments))

    async def invoke(self, arguments: BaseModel) -> Any:
        return await self.function(arguments.model_dump())


def _arguments_model(function: Callable[..., Any], name: str) -> type[BaseModel]:
    try:
        hints = get_type_hints(function, include_extras=True)
    except Exception as exc:
        raise TypeError(f"the type hints of tool {name!r} cannot be read: {exc}") from None
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(
                f"tool {name!r} takes *{parameter.name}: a tool's parameters must be named, "
                "each with a type hint"
            )
        if parameter.name not in hints:
            raise TypeError(
                f"parameter {parameter.name!r} of tool {name!r} has no type hint: the model "
                "needs it to know what to pass (e.g. `city: str`)"
            )
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], default)
    model: type[BaseModel] = create_model(
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


@overload
def agent_tool(function: FunctionT, /) -> AgentTool: ...


@overload
def agent_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalPolicy = "never",
    redact: Redaction = None,
) -> Callable[[FunctionT], AgentTool]: ...


def agent_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalPolicy = "never",
    redact: Redaction = None,
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Decorator: make a typed function a tool.

    ``@agent_tool`` or ``@agent_tool(approval="always", redact=["card"])``.

    See :class:`AgentTool` for the arguments.
    """

    def wrap(target: Callable[..., Any]) -> AgentTool:
        return AgentTool(
            target, name=name, description=description, approval=approval, redact=redact
        )

    if function is not None:
        return wrap(function)
    return wrap


@runtime_checkable
class ToolSource(Protocol):
    """Tools that live elsewhere (an MCP server's, :class:`disco.runtime.mcp.MCPTools`).

    The runner asks for them each time it runs (a source keeps them between
    calls, and lists them again when they changed).
    """

    name: str
    """What the source is called in errors and logs."""

    @property
    def may_need_approval(self) -> bool:
        """Whether any of its tools' calls could need approval."""
        ...

    async def agent_tools(self) -> Sequence[AgentTool]:
        """Its tools as they are now."""
        ...

    async def aclose(self) -> None:
        """Let go of what it holds (a connection)."""
        ...


class Toolbox:
    """The tools of an agent, by name: its own, and those of its sources (:meth:`load`).

    Raises:
        TypeError: a duplicate name, or an item that is neither a tool, a function nor a
            :class:`ToolSource`.
    """

    def __init__(self, tools: Iterable[AgentTool | ToolSource | Callable[..., Any]] = ()) -> None:
        self._own: dict[str, AgentTool] = {}
        self.sources: list[ToolSource] = []
        for item in tools:
            if isinstance(item, ToolSource) and not isinstance(item, AgentTool):
                self.sources.append(item)
                continue
            tool = item if isinstance(item, AgentTool) else AgentTool(item)
            if tool.name in self._own:
                raise TypeError(f"two tools are named {tool.name!r}: tool names must be unique")
            self._own[tool.name] = tool
        self._tools: dict[str, AgentTool] = dict(self._own)
        self._loaded: list[Sequence[AgentTool]] = []

    async def load(self) -> bool:
        """Ask the sources for their tools; whether the tools changed.

        Raises:
            TypeError: a source's tool has the name of another tool.
            Exception: what a source raised when its tools could not be read.
        """
        loaded = [await source.agent_tools() for source in self.sources]
        if len(loaded) == len(self._loaded) and all(
            new is old for new, old in zip(loaded, self._loaded, strict=True)
        ):
            return False
        tools = dict(self._own)
        for source, source_tools in zip(self.sources, loaded, strict=True):
            for tool in source_tools:
                if tool.name in tools:
                    raise TypeError(
                        f"tool {tool.name!r} of {source.name!r} has the name of another tool: "
                        "give the source a prefix"
                    )
                tools[tool.name] = tool
        self._tools, self._loaded = tools, loaded
        return True

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> AgentTool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [tool.spec() for tool in self._tools.values()]


def result_text(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    return json.dumps(to_json_safe(value), ensure_ascii=False, separators=(",", ":"))
