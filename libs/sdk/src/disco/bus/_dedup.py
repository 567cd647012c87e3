"""Deduplication of envelopes by ``id``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol, runtime_checkable

import structlog
from aiokafka.structs import ConsumerRecord

from disco._context import maybe_current_context
from disco_common.dedup import DEDUP_BATCH_MAX
from disco_common.envelope import tenant_header

__all__ = ["DedupMarks", "DedupStore", "DurableDedupStore", "InMemoryDedupStore"]

_log = structlog.get_logger("disco.bus")

_ID_HEADER = "ce_id"
_RETRY_FIRST_SECONDS = 0.2
_RETRY_MAX_SECONDS = 5.0


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

    async def check_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> Collection[str]:
        """Which of ``event_ids`` (at most 500) ``group`` handled, acting for ``tenant_id``
        (the handler context's envelope's tenant when None). An answer with a ``stepped``
        attribute (:class:`~disco.clients.DedupAnswer`) also says which have step records."""
        ...

    async def put_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> object:
        """Make the marks (idempotent), acting for ``tenant_id`` (and ``user_id``)."""
        ...


_Marker = tuple[str | None, str | None]  # whom a mark is written for: (tenant, user)


class DurableDedupStore:
    """Handled ids kept in Postgres through the memory service, for one consumer group.

    Unlike :class:`InMemoryDedupStore` it outlives the process: an envelope
    handled, then redelivered after a kill -9 or a rebalance (its offset was not
    committed yet), or published again with the same id, is skipped by
    whichever instance gets it. Marks are per tenant (the envelope's, from the
    handler context) and go with its erasure.

    The service is asked once per fetched batch, not once per envelope: the
    consumer hands each batch to :meth:`expect` before its handlers run, and the
    ids of each tenant in it go in one question (at most 500 ids each); an
    envelope handled before its answer came waits for it. The answer also says
    which envelopes have step records (:meth:`journal_hint`), so a handler's
    first ``disco.step`` reads a journal only when there is one.

    Marks are written in the background, a batch per tenant and user at a time:
    while one write is in flight, the next marks queue for the one after (at most
    ``max_pending`` waiting; a mark beyond that waits for room). The consumer
    commits an envelope's offset only once its mark is stored
    (:meth:`mark_stored`): a mark is never behind its offset. A write that fails
    is tried again with backoff until it is stored or the consumer stops
    (:meth:`give_up`), and the offsets wait for it; the handlers do not.

    Asking never stops the consumer: when the service cannot be asked, an
    envelope counts as not seen (it is handled, as at-least-once allows). So a
    handler killed after its effect and before its mark was stored runs again:
    effects outside disco's stores go in journaled steps (``disco.step``), or use
    the handler's idempotency key (:attr:`disco.HandlerContext.idempotency_key`).

    A small in-process window in front saves the service a question for
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
        # Ids asked about ahead of their handlers: the tenant asked for and the answer
        # (the ids handled, or None when it could not be had). Oldest first, bounded.
        self._asked: OrderedDict[str, tuple[str | None, asyncio.Future[frozenset[str] | None]]]
        self._asked = OrderedDict()
        self._asked_max = max(1, window)
        self._asking: set[asyncio.Task[None]] = set()
        # What the batch answers said of step records: id -> whether it has some.
        self._stepped: OrderedDict[str, bool] = OrderedDict()
        self._unwritten: dict[_Marker, list[tuple[str, asyncio.Future[bool]]]] = {}
        self._writers: dict[_Marker, asyncio.Task[None]] = {}
        self._pending = 0
        self._max_pending = max(1, max_pending)
        self._room = asyncio.Event()
        self._giving_up = asyncio.Event()

    def expect(self, records: Iterable[ConsumerRecord[bytes, bytes]]) -> None:
        """Ask about a fetched batch's envelopes now, one question per tenant, so that
        their :meth:`seen` finds the answer (records are read by their ``ce_id`` and
        ``ce_tenantid`` headers; one without an id is asked about when handled)."""
        by_tenant: dict[str | None, list[str]] = {}
        for record in records:
            headers = record.headers
            raw_id = next((value for name, value in headers if name == _ID_HEADER), None)
            event_id = raw_id.decode("utf-8", "replace") if raw_id is not None else None
            tenant_id = tenant_header(headers)
            if event_id is None or event_id in self._asked or self._recent.seen_now(event_id):
                continue
            by_tenant.setdefault(tenant_id, []).append(event_id)
        loop = asyncio.get_running_loop()
        for tenant_id, ids in by_tenant.items():
            for start in range(0, len(ids), DEDUP_BATCH_MAX):
                chunk = ids[start : start + DEDUP_BATCH_MAX]
                answer: asyncio.Future[frozenset[str] | None] = loop.create_future()
                for event_id in chunk:
                    self._asked[event_id] = (tenant_id, answer)
                task = asyncio.create_task(
                    self._ask(tenant_id, chunk, answer), name=f"disco-dedup-{self.group}"
                )
                self._asking.add(task)
                task.add_done_callback(self._asking.discard)
        while len(self._asked) > self._asked_max:
            self._asked.popitem(last=False)  # never handled here (no route, revoked...)

    async def seen(self, event_id: str) -> bool:
        """Whether the group handled ``event_id`` (asks the service unless seen here or
        asked about already with its batch)."""
        if self._recent.seen_now(event_id):
            return True
        context = maybe_current_context()
        tenant_id = context.envelope.tenant_id if context is not None else None
        asked = self._asked.pop(event_id, None)
        if asked is not None and asked[0] == tenant_id:
            # Shielded: a handler cancelled while waiting must not cancel the batch's answer.
            handled = await asyncio.shield(asked[1])
            if handled is not None:
                return event_id in handled
        try:
            answer = await self.marks.check_dedup_marks(self.group, [event_id])
            self._note_steps([event_id], answer)
            return event_id in answer
        except Exception as exc:
            _log.warning(
                "dedup marks unavailable: handling the envelope as new",
                group=self.group,
                event_id=event_id,
                error=repr(exc),
            )
            return False

    def journal_hint(self, event_id: str) -> bool | None:
        """What the service said of ``event_id``'s step records when its batch was asked
        about: True (it has some), False (none), None (not asked here)."""
        return self._stepped.get(event_id)

    async def mark(self, event_id: str) -> None:
        """Remember ``event_id`` here now, and durably in the background."""
        await self.mark_stored(event_id)

    async def mark_stored(self, event_id: str) -> asyncio.Future[bool]:
        """Remember ``event_id`` here now and queue its durable mark; return a future of
        it: True once it is stored, False when it was given up (:meth:`give_up`)."""
        self._recent.mark_now(event_id)
        context = maybe_current_context()
        marker: _Marker = (
            (context.envelope.tenant_id, context.envelope.user_id)
            if context is not None
            else (None, None)
        )
        while self._pending >= self._max_pending:
            self._room.clear()
            await self._room.wait()
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._unwritten.setdefault(marker, []).append((event_id, stored))
        self._pending += 1
        if marker not in self._writers:
            self._writers[marker] = asyncio.create_task(
                self._write_queued(marker), name=f"disco-dedup-{self.group}"
            )
        return stored

    async def flush(self) -> None:
        """Wait until the marks written in the background are stored (or given up)."""
        while self._writers:
            await asyncio.wait(set(self._writers.values()))

    async def give_up(self) -> None:
        """Stop retrying the marks that could not be written: their futures say False
        (their offsets stay uncommitted, so their envelopes come again). The store
        can be used again afterwards."""
        self._giving_up.set()
        try:
            await self.flush()
        finally:
            self._giving_up.clear()

    def _note_steps(self, asked: Sequence[str], answer: Collection[str]) -> None:
        stepped = getattr(answer, "stepped", None)
        if stepped is None:
            return  # a store that says nothing of steps
        for event_id in asked:
            self._stepped[event_id] = event_id in stepped
            self._stepped.move_to_end(event_id)
        while len(self._stepped) > self._asked_max:
            self._stepped.popitem(last=False)

    async def _ask(
        self,
        tenant_id: str | None,
        event_ids: list[str],
        answer: asyncio.Future[frozenset[str] | None],
    ) -> None:
        try:
            handled = await self.marks.check_dedup_marks(self.group, event_ids, tenant_id=tenant_id)
        except Exception as exc:
            _log.warning(
                "dedup marks unavailable: asking again for each envelope",
                group=self.group,
                envelopes=len(event_ids),
                error=repr(exc),
            )
            answer.set_result(None)
        else:
            self._note_steps(event_ids, handled)
            answer.set_result(frozenset(handled))

    async def _write_queued(self, marker: _Marker) -> None:
        ttl = max(1, round(self.ttl_seconds)) if self.ttl_seconds else None
        delay = _RETRY_FIRST_SECONDS
        try:
            while queue := self._unwritten.get(marker):
                batch = queue[:DEDUP_BATCH_MAX]
                del queue[:DEDUP_BATCH_MAX]
                try:
                    await self.marks.put_dedup_marks(
                        self.group,
                        [event_id for event_id, _ in batch],
                        ttl_seconds=ttl,
                        tenant_id=marker[0],
                        user_id=marker[1],
                    )
                except asyncio.CancelledError:
                    self._settle(batch, stored=False)
                    raise
                except Exception as exc:
                    if self._giving_up.is_set():
                        self._settle(batch, stored=False)
                        continue
                    _log.warning(
                        "dedup marks not stored yet; retrying (their offsets wait for them)",
                        group=self.group,
                        envelopes=len(batch),
                        retry_in_seconds=round(delay, 2),
                        error=repr(exc),
                    )
                    queue[:0] = batch  # first again, in order
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._giving_up.wait(), delay)
                    delay = min(delay * 2, _RETRY_MAX_SECONDS)
                    continue
                delay = _RETRY_FIRST_SECONDS
                self._settle(batch, stored=True)
        finally:
            # No await between the empty check above and here: a mark queued in
            # between would have found this writer still registered.
            del self._writers[marker]
            left = self._unwritten.pop(marker, None)
            if left:  # cancelled with marks in hand
                self._settle(left, stored=False)

    def _settle(self, batch: list[tuple[str, asyncio.Future[bool]]], *, stored: bool) -> None:
        for _, future in batch:
            if not future.done():
                future.set_result(stored)
        self._pending -= len(batch)
        self._room.set()
