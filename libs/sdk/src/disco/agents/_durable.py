"""The durable-state core that Workers and Planners share.

A task (Worker) and a plan (Planner) are contexts saved in the memory service.
Both follow the same rules, kept here once:

- **Versioned saves.** Every write carries the version it read
  (:class:`DurableContext`); a write over another version raises a
  :class:`~disco.agents.StateConflictError` subclass, and the step that made it
  is re-run on a fresh copy (:func:`retry_on_conflict`).
- **Save, then publish.** What a save promises to publish (requests, a question,
  the final answer) is recorded with the id of the envelope whose handling
  saved it (:func:`current_cause`) and published with ids and times fixed by
  the record (:func:`publish_again`), so publishing it again is harmless.
- **Recovery of due entries.** An envelope redelivered after a crash finds
  what its first handling saved and publishes it again; a stale answer also
  re-sends what has waited longer than a grace period (:class:`Recovery`),
  each at most once per grace by this process (:class:`ResendMemo`).
- **Error conversion.** What handlers pass as an error becomes one
  :class:`~disco_common.tasks.ErrorInfo` (:func:`as_error`).
"""

from __future__ import annotations

import asyncio
import random
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import pydantic_core

from disco._context import maybe_current_context
from disco._steps import StepNotRecordedError
from disco.agents._errors import StateConflictError
from disco.agents._handlers import error_info
from disco.bus import BusClient, BusError
from disco.clients import ServiceConflictError, ServiceUnavailableError
from disco_common.envelope import envelope_class_for
from disco_common.memory import PlanContextRecord, TaskContextRecord
from disco_common.plans import PlanContextData
from disco_common.tasks import ErrorInfo, TaskContextData
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = [
    "CONFLICT_RETRIES",
    "FINISHER_GRACE",
    "KEPT_PAYLOAD_MAX_BYTES",
    "KEPT_TOTAL_MAX_BYTES",
    "RESEND_GRACE",
    "SAVED_COPIES",
    "SCOPE_KEYS",
    "TRANSIENT",
    "DurableContext",
    "KeyedLocks",
    "Recovery",
    "ResendMemo",
    "SavedCopies",
    "as_error",
    "current_cause",
    "json_size",
    "publish_again",
    "retry_on_conflict",
    "scope_of",
    "utc_now",
]

TRANSIENT = (ServiceUnavailableError, BusError, StepNotRecordedError)
"""Failures of the platform itself: the bus retries the envelope instead of failing the work
(a step whose result could not be recorded is recorded by the retry before it goes on)."""

CONFLICT_RETRIES = 20
"""How often a step is re-run on a fresh copy when another instance moved its context."""

RESEND_GRACE = timedelta(seconds=10)
"""How old a pending request, question or action must be before a stale answer re-sends it.

Younger ones are most likely on their way; re-sending them would only double traffic.
"""

FINISHER_GRACE = timedelta(seconds=10)
"""How long a final outcome may stay unconfirmed before a stale answer publishes it again.

Normally it is confirmed (or the context deleted) milliseconds after it went out;
one still unconfirmed after this long belongs to a process that died in between.
"""

KEPT_PAYLOAD_MAX_BYTES = 64 * 1024
"""The largest request payload a context keeps to re-send it after a crash."""

KEPT_TOTAL_MAX_BYTES = 256 * 1024
"""The most pending payloads one context keeps together.

Contexts hold at most 4 MiB, and every answer rewrites the whole context: kept
payloads must not make a large fan-out's writes much heavier. (Payloads
delegated by a task handler are re-sent from the handler's own run anyway.)
"""

SCOPE_KEYS = ("tenant_id", "user_id", "session_id", "plan_id")
"""The envelope attributes a context's envelopes inherit from the request that started it."""

DataT = TypeVar("DataT", TaskContextData, PlanContextData)


def utc_now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


def as_error(error: ErrorInfo | BaseException | str, *, kind: str) -> ErrorInfo:
    """``error`` as an :class:`ErrorInfo`; a plain message gets the type ``kind``."""
    if isinstance(error, ErrorInfo):
        return error
    if isinstance(error, BaseException):
        return error_info(error)
    return ErrorInfo(type=kind, message=str(error)[:4000])


def scope_of(
    data: TaskContextData | PlanContextData, keys: Iterable[str] = SCOPE_KEYS
) -> dict[str, Any]:
    """The envelope attributes of ``keys`` that ``data`` has (``None`` ones left out)."""
    return {key: value for key in keys if (value := getattr(data, key)) is not None}


def current_cause() -> str | None:
    """The id of the envelope whose handler runs now (what a save records as its cause)."""
    context = maybe_current_context()
    return context.envelope.id if context is not None else None


def json_size(value: Any) -> int:
    """The size of ``value`` encoded as JSON, in bytes."""
    return len(pydantic_core.to_json(value))


async def publish_again(
    bus: BusClient,
    topic: str | Topic,
    event_type: str,
    data: Any,
    *,
    id: str,
    time: datetime,
    traceparent: str | None = None,
    **attributes: Any,
) -> None:
    """Publish an envelope that a saved context describes: its id, time and cause fixed.

    Used for the first publish and for every re-send, so that a re-sent
    envelope is the one first sent: receivers deduplicate on the id, and the
    time matters to readers that keep it (the tracker starts a question's
    timeout from it). ``traceparent`` is used outside a handler.
    """
    fields: dict[str, Any] = {
        "id": id,
        "time": time,
        "source": bus.source,
        "type": event_type,
        "data": data,
    }
    fields.update({key: value for key, value in attributes.items() if value is not None})
    # The trace of the handler that publishes, else the one the caller kept.
    context = maybe_current_context()
    if context is not None and context.envelope.traceparent is not None:
        traceparent = context.envelope.traceparent
    if traceparent is not None:
        fields["traceparent"] = traceparent
    await bus.publish_envelope(topic, envelope_class_for(topic).from_dict(fields))


class ResendMemo:
    """What this process re-sent lately because it was old, so a burst re-sends once.

    Re-sending is harmless (the same ids) but not free: without this, every
    stale answer arriving while a sub-task is legitimately slow would send its
    request again.
    """

    def __init__(
        self, interval_seconds: float = RESEND_GRACE.total_seconds(), size: int = 10_000
    ) -> None:
        self._interval = interval_seconds
        self._size = size
        self._sent: OrderedDict[str, float] = OrderedDict()

    def due(self, key: str) -> bool:
        """Whether ``key`` was not re-sent by this process within the interval."""
        last = self._sent.get(key)
        return last is None or time.monotonic() - last >= self._interval

    def sent(self, key: str) -> None:
        """Remember that ``key`` was re-sent now."""
        self._sent[key] = time.monotonic()
        self._sent.move_to_end(key)
        while len(self._sent) > self._size:
            self._sent.popitem(last=False)


class Recovery:
    """Which entries of a saved context are due to be published again, for one handling.

    Due is what ``cause`` (the envelope being handled) brought about: it comes
    again only because its first handling did not finish, so what that
    handling saved may never have gone out. With ``by_age``, also what has
    waited longer than its grace (each key at most once per grace by this
    process, see :class:`ResendMemo`).
    """

    def __init__(self, memo: ResendMemo, cause: str | None, *, by_age: bool) -> None:
        self._memo = memo
        self._cause = cause
        self._by_age = by_age
        self._now = utc_now()

    def due(
        self, key: str, caused_by: str | None, since: datetime | None, grace: timedelta
    ) -> bool:
        """Whether the entry ``key``, saved by ``caused_by`` at ``since``, is to be sent again."""
        if self._cause is not None and caused_by == self._cause:
            return True
        return (
            self._by_age and since is not None and self._now - since > grace and self._memo.due(key)
        )

    def sent(self, key: str) -> None:
        """Note that ``key`` was sent again (or given up on) now."""
        self._memo.sent(key)


async def retry_on_conflict(step: Callable[[], Awaitable[None]]) -> None:
    """Run ``step``; when another instance moved its context meanwhile, run it again.

    ``step`` reads the context afresh each time. After :data:`CONFLICT_RETRIES`
    attempts the conflict escapes (the bus retries the envelope).
    """
    for attempt in range(1, CONFLICT_RETRIES + 1):
        try:
            await step()
            return
        except StateConflictError:
            if attempt == CONFLICT_RETRIES:
                raise
            await asyncio.sleep(random.uniform(0, 0.005 * attempt))


SAVED_COPIES = 1024
"""Contexts whose last saved copy a Planner or Worker keeps (the most recently saved)."""

SAVED_COPIES_MAX_BYTES = 64 * 1024 * 1024
"""What those copies may weigh together, as JSON (a context may be up to 4 MiB); one
over a sixteenth of it is not kept (its next answer reads it back)."""


class SavedCopies(Generic[DataT]):
    """The contexts this process last saved, found by the ids they wait for (a plan's
    answers, a task's sub-tasks), so that the answer a copy waits for moves it
    without reading it back from the memory service.

    A copy is handed out once (:meth:`take`: the step that takes it changes it);
    the step's save, guarded by the copy's version, keeps the next one. A copy
    another instance has moved past fails that save as a conflict, which
    forgets it, and the step runs again on the stored context. Only the most
    recent :data:`SAVED_COPIES` are kept, weighing at most ``max_bytes`` together.

    Args:
        waits_for: the ids a context waits for (nothing, once it is final).
    """

    def __init__(
        self,
        waits_for: Callable[[DataT], Iterable[str]],
        limit: int = SAVED_COPIES,
        max_bytes: int = SAVED_COPIES_MAX_BYTES,
    ) -> None:
        self._waits_for: Callable[[DataT], Iterable[str]] = waits_for
        self._limit = max(1, limit)
        self._max_bytes = max_bytes
        # key -> (version, data, its JSON size)
        self._copies: OrderedDict[str, tuple[int, DataT, int]] = OrderedDict()
        self._bytes = 0
        # Whose answers the ids are, kept past a take (see owner); key -> its ids. A copy
        # waits for the ids its key owns.
        self._owners: dict[str, str] = {}
        self._owned: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._copies)

    def keep(self, key: str, version: int, data: DataT) -> None:
        """Keep ``data``, saved as ``version`` of context ``key`` (replacing its last copy)."""
        self.forget(key)
        ids = tuple(self._waits_for(data))
        if not ids:
            return  # it waits for nothing: no answer will take it
        size = json_size(data)
        if size > self._max_bytes // 16:
            return
        self._copies[key] = (version, data, size)
        self._bytes += size
        for waited in ids:
            self._owners[waited] = key
        self._owned[key] = ids
        while len(self._copies) > self._limit or self._bytes > self._max_bytes:
            self.forget(next(iter(self._copies)))
        if len(self._owned) > 4 * self._limit:
            # Owners of copies taken by steps that never saved: drop those.
            for stale in [k for k in self._owned if k not in self._copies]:
                self._disown(stale)

    def forget(self, key: str) -> None:
        """Drop the copy of ``key`` (its save lost to a newer version, or it was evicted)."""
        self._drop(key)
        self._disown(key)

    def take(self, waited: str) -> tuple[str, int, DataT] | None:
        """The copy waiting for ``waited`` (its key, version and data), handed out once."""
        key = self._owners.get(waited)
        kept = self._copies.get(key) if key is not None else None
        if key is None or kept is None:
            return None
        self._drop(key)
        return key, kept[0], kept[1]

    def owner(self, waited: str) -> str | None:
        """The context the last copy kept that waits for ``waited`` belongs to, even once
        that copy was taken (the answers of one fan-out, say, come one after the other)."""
        return self._owners.get(waited)

    def _drop(self, key: str) -> None:
        kept = self._copies.pop(key, None)
        if kept is not None:
            self._bytes -= kept[2]

    def _disown(self, key: str) -> None:
        for waited in self._owned.pop(key, ()):
            if self._owners.get(waited) == key:
                del self._owners[waited]


class KeyedLocks:
    """One :class:`asyncio.Lock` per key, dropped once nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: str | None) -> AsyncIterator[None]:
        """Hold ``key``'s lock for the block (None: no lock)."""
        if key is None:
            yield
            return
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class DurableContext(ABC, Generic[DataT]):
    """A context saved in the memory service with optimistic concurrency (task or plan).

    ``copies``: where a successful save keeps the stored copy (see :class:`SavedCopies`).
    """

    def __init__(
        self,
        data: DataT,
        platform: PlatformContext,
        *,
        version: int | None,
        copies: SavedCopies[DataT] | None = None,
    ) -> None:
        self._data: DataT = data
        self._platform = platform
        self._version = version
        self._copies: SavedCopies[DataT] | None = copies
        self._dirty = version is None
        self._started = time.monotonic()

    @property
    def version(self) -> int | None:
        """The stored version this copy is based on (``None``: never saved)."""
        return self._version

    @property
    def dirty(self) -> bool:
        """Whether this copy has changes not saved yet."""
        return self._dirty

    def snapshot(self) -> DataT:
        """A copy of the persisted form."""
        return self._data.model_copy(deep=True)

    async def _store(self) -> None:
        """Write this copy over the version it read (``0``: only if absent)."""
        expected = self._version if self._version is not None else 0
        self._data.updated_at = utc_now()
        copies = self._copies
        try:
            record = await self._write(expected)
        except ServiceConflictError:
            if copies is not None:
                copies.forget(self._key)
            raise self._conflict(expected) from None
        self._version = record.version
        self._dirty = False
        # Not when the memory handed back what it was given (this copy changes on).
        if copies is not None and record.context is not self._data:
            # The record of this kind's write (_write's type names both kinds).
            copies.keep(self._key, record.version, cast("DataT", record.context))

    @property
    @abstractmethod
    def _key(self) -> str:
        """The context's id (task or plan)."""

    @abstractmethod
    async def _write(self, expected_version: int) -> TaskContextRecord | PlanContextRecord:
        """Save ``self._data`` with ``expected_version`` (the memory call of the kind)."""

    @abstractmethod
    def _conflict(self, expected_version: int) -> StateConflictError:
        """The error a lost write raises."""
