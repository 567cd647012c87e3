"""Journaled steps: ``await disco.step(name, fn)`` inside any handler.

A step is an effect a handler wants done once per envelope (a payment, an
e-mail, a call to another system). Its result is recorded in the memory
service (``memory.step_records``, one round trip, keyed by the tenant, the
consumer group, the envelope's id and the step's name) before the handler goes
on; when the envelope comes again (a redelivery after a crash or a rebalance,
a retry after a failure), the step answers the recorded result without running
``fn`` again. A step therefore runs twice only if its process died between the
effect and its record; for that window each step hands ``fn`` a stable
idempotency key to pass to the other system.

The journal of an envelope is read once per handling, at its first step, and
not at all when the consumer's dedup check of the fetched batch said it has
none (the durable dedup store asks about marks and steps in one question).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, get_type_hints, overload, runtime_checkable

import pydantic_core
import structlog
from pydantic import JsonValue, TypeAdapter

from disco._context import HandlerContext, current_context
from disco._faults import CrashPoint, crash_point
from disco.bus import DependencyUnavailableError

__all__ = [
    "Step",
    "StepError",
    "StepJournalStore",
    "StepLog",
    "StepNotRecordedError",
    "step",
    "step_scope",
]

_log = structlog.get_logger("disco.steps")

T = TypeVar("T")

_RECORD_ATTEMPTS = 3
_RECORD_BACKOFF_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class Step:
    """What a step's function may ask about its step (``fn`` takes it when it has a parameter)."""

    name: str
    """The step's name (with the runtime tool call's id in front, inside a runtime tool)."""
    idempotency_key: str
    """``<group>/<envelope id>/<name>``: the same for every run of this step of this
    envelope in this consumer group, different for any other. Pass it to the other
    system (an ``Idempotency-Key`` header, a payment API's key, a unique column): it is
    what keeps the one re-run a crash between the effect and its record can cause from
    applying the effect twice."""
    attempt: int
    """The handler attempt running the step (1 for the first delivery)."""


class StepError(RuntimeError):
    """A step cannot be used this way (the message says how to fix it)."""


class StepNotRecordedError(DependencyUnavailableError, RuntimeError):
    """The step's journal could not be read, or its result recorded (the memory service
    did not answer): the handler fails here and the consumer tries it again until the
    service is back; a step that ran keeps its result in this process, recorded by the
    next try before it goes on, without running again."""


@runtime_checkable
class StepJournalStore(Protocol):
    """Where step results are kept: the memory service's ``/v1/memory/steps``
    (:class:`~disco.clients.MemoryClient` is one; so is :class:`disco.testing.InMemoryMemory`)."""

    async def step_journal(
        self,
        group: str,
        envelope_id: str,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> Mapping[str, JsonValue]:
        """The recorded results of the envelope's steps in ``group``, by step name."""
        ...

    async def record_step(
        self,
        group: str,
        envelope_id: str,
        name: str,
        result: JsonValue,
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> JsonValue:
        """Record a step's result; the stored one (the first recorded wins)."""
        ...


@dataclass(slots=True)
class _Journal:
    """What this process knows of one envelope's steps."""

    recorded: dict[str, JsonValue] = field(default_factory=dict)
    unrecorded: dict[str, JsonValue] = field(default_factory=dict)
    loaded: bool = False
    loading: asyncio.Future[None] | None = None


_scope: ContextVar[str | None] = ContextVar("disco_step_scope", default=None)
_used: ContextVar[tuple[HandlerContext, set[str]] | None] = ContextVar(
    "disco_steps_used", default=None
)
"""The step names one handling (one attempt: one HandlerContext) used so far."""


@contextlib.contextmanager
def step_scope(prefix: str) -> Iterator[None]:
    """Name the steps taken inside the block ``<prefix>:<name>`` (the runtime puts each
    tool call's id in front, so two calls of one tool in one handling are two steps)."""
    token = _scope.set(prefix)
    try:
        yield
    finally:
        _scope.reset(token)


class StepLog:
    """The steps of one consumer group: their journal in a store, and what this process
    knows of it (a bounded window of envelopes).

    Args:
        store: where the journal is kept.
        group: the consumer group (the agent's name).
        ttl_seconds: how long a record is kept (None: until its tenant is erased).
        window: how many envelopes' journals this process keeps.
        hint: what the consumer's dedup check said of an envelope: True (it has step
            records), False (none), None (not asked).
    """

    def __init__(
        self,
        store: StepJournalStore,
        group: str,
        *,
        ttl_seconds: float | None = None,
        window: int = 10_000,
        hint: Callable[[str], bool | None] | None = None,
    ) -> None:
        self.store = store
        self.group = group
        self.ttl_seconds = max(1, round(ttl_seconds)) if ttl_seconds else None
        self._window = max(1, window)
        self._hint = hint
        self._journals: OrderedDict[str, _Journal] = OrderedDict()

    def forget(self, envelope_id: str) -> None:
        """Forget what this process knows of the envelope's steps (as a process that
        died would: :class:`disco.testing.AgentTestKit` does it at a simulated crash)."""
        self._journals.pop(envelope_id, None)

    def _journal(self, envelope_id: str) -> _Journal:
        journal = self._journals.get(envelope_id)
        if journal is None:
            journal = self._journals[envelope_id] = _Journal()
            while len(self._journals) > self._window:
                self._journals.popitem(last=False)
        else:
            self._journals.move_to_end(envelope_id)
        return journal

    async def _load(self, context: HandlerContext, journal: _Journal) -> None:
        if journal.loaded:
            return
        envelope = context.envelope
        if self._hint is not None and self._hint(envelope.id) is False:
            journal.loaded = True  # the batch's dedup check said: no steps recorded
            return
        if journal.loading is None:
            journal.loading = asyncio.get_running_loop().create_future()
            try:
                found = await self.store.step_journal(
                    self.group,
                    envelope.id,
                    tenant_id=envelope.tenant_id,
                    user_id=envelope.user_id,
                )
            except BaseException as exc:
                loading, journal.loading = journal.loading, None
                loading.set_result(None)
                if isinstance(exc, Exception):
                    raise StepNotRecordedError(
                        f"the journal of envelope {envelope.id!r} cannot be read: {exc!r}"
                    ) from exc
                raise
            for name, result in found.items():
                journal.recorded.setdefault(name, result)
            journal.loaded = True
            journal.loading.set_result(None)
            journal.loading = None
        else:
            await asyncio.shield(journal.loading)
            await self._load(context, journal)

    async def _record(self, context: HandlerContext, name: str, result: JsonValue) -> JsonValue:
        envelope = context.envelope
        delay = _RECORD_BACKOFF_SECONDS
        for attempt in range(1, _RECORD_ATTEMPTS + 1):
            try:
                return await self.store.record_step(
                    self.group,
                    envelope.id,
                    name,
                    result,
                    ttl_seconds=self.ttl_seconds,
                    tenant_id=envelope.tenant_id,
                    user_id=envelope.user_id,
                )
            except Exception as exc:
                if not _retriable(exc):
                    # The service refused the result itself (too large, say): no try fixes it.
                    raise StepError(
                        f"step {name!r} ran but the memory service refused its result: {exc}"
                    ) from exc
                if attempt == _RECORD_ATTEMPTS:
                    raise StepNotRecordedError(
                        f"step {name!r} ran but its result could not be recorded: {exc!r}"
                    ) from exc
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(
        self,
        context: HandlerContext,
        name: str,
        fn: Callable[..., Any],
        result_type: Any = None,
    ) -> Any:
        """Run step ``name`` of ``context``'s handling (see :func:`step`)."""
        if not isinstance(name, str) or not name or len(name) > 150:
            raise StepError(f"a step's name is 1-150 characters, got {name!r}")
        scope = _scope.get()
        full = f"{scope}:{name}" if scope else name
        journal = self._journal(context.envelope.id)
        handling = _used.get()
        if handling is None or handling[0] is not context:
            handling = (context, set())
            _used.set(handling)
        used = handling[1]
        if full in used:
            raise StepError(
                f"step {full!r} ran already in this handling of envelope "
                f"{context.envelope.id!r}: give each step of a handler its own name "
                '(e.g. f"charge-{item.id}" in a loop)'
            )
        used.add(full)
        adapter = _adapter(fn, result_type)
        await self._load(context, journal)
        if full in journal.recorded:
            return _decoded(journal.recorded[full], adapter)
        if full in journal.unrecorded:
            # Ran in this process, its record failed: record it now, without running it.
            encoded = journal.unrecorded[full]
        else:
            value = await _call(fn, self._step(context, full))
            encoded = _encoded(full, value, adapter)
            journal.unrecorded[full] = encoded
            crash_point(CrashPoint.STEP_RAN)
        stored = await self._record(context, full, encoded)
        journal.unrecorded.pop(full, None)
        journal.recorded[full] = stored
        crash_point(CrashPoint.STEP_RECORDED)
        if stored != encoded:
            _log.warning(
                "the step was recorded by another run first: its result stands",
                step=full,
                group=self.group,
            )
        return _decoded(stored, adapter)

    def _step(self, context: HandlerContext, name: str) -> Step:
        envelope_id = context.envelope.id
        key = f"{context.group}/{envelope_id}/{name}" if context.group else f"{envelope_id}/{name}"
        return Step(name=name, idempotency_key=key, attempt=context.attempt)


def _retriable(exc: Exception) -> bool:
    status = getattr(exc, "status", None)
    return not (isinstance(status, int) and 400 <= status < 500 and status != 429)


async def _call(fn: Callable[..., Any], info: Step) -> Any:
    result = fn(info) if _takes_step(fn) else fn()
    if inspect.isawaitable(result):
        result = await result
    return result


def _takes_step(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) == 1


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(fn: Callable[..., Any], result_type: Any) -> TypeAdapter[Any] | None:
    wanted = result_type
    if wanted is None:
        try:
            hints = get_type_hints(fn)
        except Exception:
            hints = {}  # a callable object, a builtin, hints that do not resolve
        if "return" not in hints:
            return None  # an unannotated function (a lambda): its result must be plain JSON
        # (an async def's annotation is the awaited result's type already)
        wanted = hints["return"]
    if wanted is None or wanted is type(None):
        return None
    adapter = _ADAPTERS.get(wanted)
    if adapter is None:
        try:
            adapter = TypeAdapter(wanted)
        except Exception as exc:
            raise StepError(f"a step's result type must be a type pydantic knows: {exc}") from None
        if len(_ADAPTERS) < 1024:
            _ADAPTERS[wanted] = adapter
    return adapter


def _encoded(name: str, value: Any, adapter: TypeAdapter[Any] | None) -> JsonValue:
    if adapter is not None:
        encoded: JsonValue = adapter.dump_python(value, mode="json")
        return encoded
    plain = pydantic_core.to_jsonable_python(value)
    if plain != value:
        raise StepError(
            f"step {name!r} returned a {type(value).__name__}, which a replay could not give "
            "back as it is: return plain JSON (dict, list, str, int, float, bool, None), or "
            "annotate the function's return type (or pass result_type=...) so the recorded "
            "result is read back as that type"
        )
    return plain  # type: ignore[no-any-return]


def _decoded(stored: JsonValue, adapter: TypeAdapter[Any] | None) -> Any:
    return adapter.validate_python(stored) if adapter is not None else stored


@overload
async def step(name: str, fn: Callable[..., Awaitable[T]], *, result_type: None = None) -> T: ...


@overload
async def step(name: str, fn: Callable[..., T], *, result_type: None = None) -> T: ...


@overload
async def step(name: str, fn: Callable[..., Any], *, result_type: type[T]) -> T: ...


async def step(name: str, fn: Callable[..., Any], *, result_type: Any = None) -> Any:
    """Run ``fn`` once for the envelope being handled, and record its result.

    Inside any handler (a Tool's, a Worker's, a Planner's, a runtime tool's):
    the first time step ``name`` runs for this envelope in this consumer group,
    ``fn`` is called (with no argument, or with the :class:`Step` when it takes
    one), and its result is recorded in the memory service before ``step``
    returns it. When the envelope comes again (redelivered after a crash or a
    rebalance, or retried after the handler failed later on), ``step`` returns
    the recorded result and ``fn`` is not called. ``fn`` runs twice only if the
    process died after its effect and before the record: pass
    ``Step.idempotency_key`` to the other system for that window::

        charge = await disco.step(
            "charge",
            lambda s: payments.charge(order.total, idempotency_key=s.idempotency_key),
            result_type=Charge,
        )

    Results are recorded as JSON: ``fn``'s return annotation (or ``result_type``)
    says how a recorded result is read back; an unannotated ``fn`` (a lambda)
    must return plain JSON. A failing ``fn`` records nothing (the handler's
    retry runs it again). Each step of one handling has its own name.

    Args:
        name: the step's name within the handler (1-150 characters).
        fn: the effect: a function or coroutine function of no argument or of the
            :class:`Step`.
        result_type: the type of the result (default: ``fn``'s return annotation).

    Returns:
        ``fn``'s result, or the result recorded by an earlier run.

    Raises:
        NotInHandlerError: outside a handler.
        StepError: the name was used already in this handling, the result cannot be
            recorded as JSON, or the agent keeps no step journal.
        StepNotRecordedError: the result could not be recorded (the handler is retried).
    """
    context = current_context()
    steps = context.steps
    if steps is None:
        raise StepError(
            f"the consumer of group {context.group!r} keeps no step journal: steps need a "
            "memory (an agent's MemoryClient, disco.testing's InMemoryMemory, or "
            "BusConsumer(steps=StepLog(...)))"
        )
    return await steps.run(context, name, fn, result_type)
