"""Batch handlers: a partition's envelopes handed over together, the worker per
partition that gathers them (one batch at a time, in offset order), and the
fetching that leaves a busy partition's records at the client meanwhile.

What the bus does with a batch (parsing, dead-lettering, retries, splitting) is
:meth:`disco.bus.BusConsumer.on_batch`'s to describe; this module only gathers a
partition's records into batches, says when a batch is done, and fetches. It
takes what it needs as callables and aiokafka's consumer, not the bus consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from disco.bus._errors import Abandoned
from disco_common.envelope import Envelope

__all__ = [
    "Batch",
    "BatchHandler",
    "BatchHandlerT",
    "BatchItem",
    "BatchRoute",
    "BatchWorker",
    "BusyPartitions",
]

Fetched = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]


class BatchItem(NamedTuple):
    """One envelope of a :class:`Batch`, with where it was read."""

    envelope: Envelope
    offset: int
    """Its offset in the batch's partition."""
    size: int
    """The bytes of its record's value (what it weighs on the wire)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Envelopes of one partition, in offset order, handed to a batch handler at once.

    Only envelopes are in it: a record that is not an envelope, or whose tenant no
    credential vouches for, went to the dead-letter topic before the call. The
    handler is not inside a handler context (:func:`disco.current_envelope`
    raises): the batch holds many envelopes.
    """

    topic: str
    """The logical topic (without the environment prefix)."""
    partition: int
    items: tuple[BatchItem, ...]
    attempt: int = 1
    """1 on the first call with these envelopes, then 2, 3... on retries (a retry
    after a split starts at 1 again: see :meth:`~disco.bus.BusConsumer.on_batch`)."""

    @property
    def envelopes(self) -> list[Envelope]:
        """The envelopes, in offset order."""
        return [item.envelope for item in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[BatchItem]:
        return iter(self.items)


BatchHandler = Callable[[Batch], Awaitable[object]]
"""A batch handler: an ``async def`` taking a :class:`Batch`."""
BatchHandlerT = TypeVar("BatchHandlerT", bound=BatchHandler)


@dataclass(frozen=True, slots=True)
class BatchRoute:
    """A topic's batch handler and how its batches are gathered."""

    handler: BatchHandler
    max_records: int
    """Most envelopes in one batch."""
    linger_ms: int
    """How long a batch waits for more records once its first one arrived (0: it is
    handed over with what was fetched)."""


class BatchWorker:
    """Gathers one partition's records into batches and hands them over one at a time.

    A batch is what was fetched for the partition and not yet handed over, up to
    ``max_records``; when fewer are there it waits up to ``linger_seconds`` for
    more. The next batch starts only once the last one is done (``handle``
    returned), and then ``done`` is told its last offset: the consumer commits
    past a batch only after all of it was handled. ``busy`` is told when a batch
    is handed over and when it is done (see :class:`BusyPartitions`).

    Args:
        tp: the partition.
        max_records: most records in one batch.
        linger_seconds: how long a batch waits for more records.
        handle: handles a batch of records to its end (handled or dead-lettered);
            raises :class:`~disco.bus._errors.Abandoned` when the consumer stops first.
        done: records that the partition is handled up to and including an offset.
        busy: told ``(tp, True)`` when a batch is handed over, ``(tp, False)`` when
            it is done (or abandoned).
        fail: takes an unexpected error (the consumer stops with it).
        name: the worker task's name.
    """

    def __init__(
        self,
        tp: TopicPartition,
        max_records: int,
        linger_seconds: float,
        *,
        handle: Callable[[Sequence[ConsumerRecord[bytes, bytes]]], Awaitable[None]],
        done: Callable[[TopicPartition, int], None],
        busy: Callable[[TopicPartition, bool], None],
        fail: Callable[[BaseException], None],
        name: str,
    ) -> None:
        self.tp = tp
        self._busy = busy
        self.closed = False
        self._max = max(1, max_records)
        self._linger = max(0.0, linger_seconds)
        self._handle = handle
        self._done = done
        self._fail = fail
        self._queue: deque[ConsumerRecord[bytes, bytes]] = deque()
        self._ready = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=name)

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        """The worker's task (to wait for, or cancel)."""
        return [self._task]

    @property
    def backlog(self) -> int:
        """Records fetched and not yet handed over."""
        return len(self._queue)

    def feed(self, records: Iterable[ConsumerRecord[bytes, bytes]]) -> None:
        """Queue fetched records (in offset order) for the next batches."""
        self._queue.extend(records)
        self._ready.set()

    def close(self) -> None:
        """Finish the batch in hand, drop the records not yet handed over, and end."""
        self.closed = True
        self._queue.clear()
        self._ready.set()

    async def _run(self) -> None:
        queue = self._queue
        try:
            while True:
                if not queue:
                    if self.closed:
                        return
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                if self._linger and len(queue) < self._max:
                    await self._linger_for_more()
                    if not queue:  # closed meanwhile: nothing was handed over
                        return
                batch = [queue.popleft() for _ in range(min(self._max, len(queue)))]
                self._busy(self.tp, True)
                try:
                    await self._handle(batch)
                finally:
                    self._busy(self.tp, False)
                self._done(self.tp, batch[-1].offset)
        except Abandoned:
            return
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaced through run(), never swallowed
            self._fail(exc)

    async def _linger_for_more(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._linger
        while len(self._queue) < self._max and not self.closed:
            left = deadline - loop.time()
            if left <= 0:
                return
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._ready.wait()


class BusyPartitions:
    """Fetching that leaves a partition's records at the client while its batch is
    being handled.

    What arrives meanwhile would only queue behind the batch; fetched at once, it
    would come in one small response after another (a busy stream keeps every
    fetch short), each a round trip for the broker and this process. Left at the
    client, it waits as one response (aiokafka keeps the last it fetched for a
    partition nobody took records from, and fetches that partition again only
    once they are taken), handed over when the batch is done. The other
    partitions are fetched as usual.
    """

    def __init__(self) -> None:
        self._busy: set[TopicPartition] = set()
        self._freed = asyncio.Event()

    def mark(self, tp: TopicPartition, busy: bool) -> None:
        """``tp``'s batch was handed over (``busy``) or is done."""
        if busy:
            self._busy.add(tp)
        else:
            self._busy.discard(tp)
            self._freed.set()

    async def fetch(self, consumer: AIOKafkaConsumer, timeout: float) -> Fetched:  # noqa: ASYNC109
        """What ``consumer`` fetched for the partitions that are not busy, waiting up to
        ``timeout`` seconds for some; returns early (maybe with nothing) when a busy
        partition's batch is done, so that its records are taken at once."""
        busy = self._busy
        timeout_ms = int(timeout * 1000)
        if not busy:
            records: Fetched = await consumer.getmany(timeout_ms=timeout_ms)
            return records
        self._freed.clear()
        ready = [tp for tp in consumer.assignment() if tp not in busy]
        freed: asyncio.Future[Any] = asyncio.ensure_future(self._freed.wait())
        fetch: asyncio.Future[Fetched] | None = (
            asyncio.ensure_future(consumer.getmany(*ready, timeout_ms=timeout_ms))
            if ready
            else None
        )
        try:
            waiting: set[asyncio.Future[Any]] = {freed} if fetch is None else {freed, fetch}
            await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            freed.cancel()
            if fetch is not None and not fetch.done():
                # Still waiting for records, none taken: nothing is lost by cancelling.
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fetch
        if fetch is None or fetch.cancelled():
            return {}
        return fetch.result()
