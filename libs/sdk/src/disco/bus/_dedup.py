"""Deduplication of envelopes by ``id``."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import structlog

__all__ = ["DedupMarks", "DedupStore", "DurableDedupStore", "InMemoryDedupStore"]

_log = structlog.get_logger("disco.bus")


@runtime_checkable
class DedupStore(Protocol):
    """Remembers which envelope ids a consumer group already handled.

    One store belongs to one consumer group. The consumer asks :meth:`seen`
    before calling a handler and calls :meth:`mark` only after the handler
    succeeded, so a failed attempt can be retried. Both are async so that a
    durable store (backed by the memory service, say) can replace the
    in-process window.

    The consumer calls both inside the handler context of the envelope (so a
    store that talks to a service acts for the envelope's tenant).
    """

    async def seen(self, event_id: str) -> bool:
        """Whether ``event_id`` was handled already (within the store's window)."""
        ...

    async def mark(self, event_id: str) -> None:
        """Remember that ``event_id`` was handled."""
        ...


class InMemoryDedupStore:
    """A bounded window of recently handled ids, kept in this process.

    It forgets the oldest id beyond ``max_size`` and any id older than
    ``ttl_seconds``; a duplicate arriving later than that is handled again,
    which at-least-once delivery allows. ``max_size=0`` turns it off.
    """

    def __init__(
        self,
        max_size: int = 100_000,
        ttl_seconds: float = 3600.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_size < 0 or ttl_seconds < 0:
            raise ValueError("max_size and ttl_seconds must not be negative")
        self.max_size = max_size
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        # id -> time it expires; oldest first, so expiry and eviction pop the front.
        self._expires: OrderedDict[str, float] = OrderedDict()
        self._marks = 0

    def __len__(self) -> int:
        return len(self._expires)

    async def seen(self, event_id: str) -> bool:
        """Whether ``event_id`` was marked and has not expired."""
        return self.seen_now(event_id)

    async def mark(self, event_id: str) -> None:
        """Remember ``event_id`` for ``ttl_seconds`` (dropping the oldest beyond ``max_size``)."""
        self.mark_now(event_id)

    def seen_now(self, event_id: str) -> bool:
        """:meth:`seen` without awaiting (the consumer's per-record path)."""
        expires = self._expires.get(event_id)
        if expires is None:
            return False
        if expires <= self._clock():
            del self._expires[event_id]
            return False
        return True

    def mark_now(self, event_id: str) -> None:
        """:meth:`mark` without awaiting."""
        if self.max_size == 0:
            return
        now = self._clock()
        expires = self._expires
        expires[event_id] = now + self.ttl_seconds
        expires.move_to_end(event_id)
        if len(expires) > self.max_size:
            expires.popitem(last=False)
        # Expired ids sit at the front; drop them now and then, not every call.
        self._marks += 1
        if self._marks % 256 == 0:
            while expires:
                oldest, when = next(iter(expires.items()))
                if when > now:
                    break
                del expires[oldest]


@runtime_checkable
class DedupMarks(Protocol):
    """Where a :class:`DurableDedupStore` keeps its marks: the memory service's
    ``/v1/memory/dedup`` (:class:`~disco.clients.MemoryClient` is one)."""

    async def get_dedup_mark(self, group: str, event_id: str) -> object | None:
        """The mark of ``event_id`` for ``group``, or None."""
        ...

    async def put_dedup_mark(
        self, group: str, event_id: str, *, ttl_seconds: int | None = None
    ) -> object:
        """Make the mark (idempotent)."""
        ...


class DurableDedupStore:
    """Handled ids kept in Postgres through the memory service, for one consumer group.

    Unlike :class:`InMemoryDedupStore` it outlives the process: an envelope
    handled, then redelivered after a kill -9 or a rebalance (its offset was not
    committed yet), or published again with the same id, is skipped by
    whichever instance gets it. Marks are per tenant (the envelope's, from the
    handler context) and go with its erasure.

    It never stops the consumer: when the service cannot be asked, an envelope
    counts as not seen (it is handled, as at-least-once allows), and a mark is
    written in the background (in the envelope's context), at most
    ``max_pending`` at a time, a failed one logged and dropped; either way the
    worst outcome is a handler running again. So a handler killed after its
    effect and before the mark also runs again: effects outside disco's stores
    use the handler's idempotency key (:attr:`disco.HandlerContext.idempotency_key`).

    A small in-process window in front saves the service a round trip for
    duplicates this process saw itself.
    """

    def __init__(
        self,
        marks: DedupMarks,
        group: str,
        *,
        ttl_seconds: float = 3600.0,
        window: int = 10_000,
        max_pending: int = 256,
    ) -> None:
        self.marks = marks
        self.group = group
        self.ttl_seconds = ttl_seconds
        self._recent = InMemoryDedupStore(window, ttl_seconds)
        self._pending: set[asyncio.Task[None]] = set()
        self._max_pending = max(1, max_pending)

    async def seen(self, event_id: str) -> bool:
        """Whether the group handled ``event_id`` (asks the service unless seen here)."""
        if await self._recent.seen(event_id):
            return True
        try:
            return await self.marks.get_dedup_mark(self.group, event_id) is not None
        except Exception as exc:
            _log.warning(
                "dedup marks unavailable: handling the envelope as new",
                group=self.group,
                event_id=event_id,
                error=repr(exc),
            )
            return False

    async def mark(self, event_id: str) -> None:
        """Remember ``event_id`` here now, and durably in the background."""
        await self._recent.mark(event_id)
        while len(self._pending) >= self._max_pending:
            await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
        # The task copies the handler context: the mark is the envelope's tenant's.
        task = asyncio.create_task(self._write(event_id), name=f"disco-dedup-{self.group}")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Wait until the marks written in the background are stored (or dropped)."""
        while self._pending:
            await asyncio.wait(set(self._pending))

    async def _write(self, event_id: str) -> None:
        ttl = max(1, round(self.ttl_seconds)) if self.ttl_seconds else None
        try:
            await self.marks.put_dedup_mark(self.group, event_id, ttl_seconds=ttl)
        except Exception as exc:
            _log.warning(
                "dedup mark not stored (a redelivery would run the handler again)",
                group=self.group,
                event_id=event_id,
                error=repr(exc),
            )
