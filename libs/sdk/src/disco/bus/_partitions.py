"""A consumer's partitions: one worker per partition (per-key order, lanes for
concurrency), and the rebalance listener."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import ConsumerRecord

from disco.bus._errors import Abandoned

Wants = Callable[[ConsumerRecord[bytes, bytes]], bool]
"""Whether a handler may want a record (records nobody wants are done at once)."""
Handle = Callable[[ConsumerRecord[bytes, bytes]], Awaitable["asyncio.Future[bool] | None"]]
"""Handles a record to its end; may return the future of its dedup mark."""

__all__ = ["PartitionWorker", "Rebalance", "finish", "finish_all"]


class _Lane:
    """Records handled one after another by one task."""

    __slots__ = ("load", "queue", "ready", "task")

    def __init__(self) -> None:
        self.queue: deque[ConsumerRecord[bytes, bytes]] = deque()
        self.ready = asyncio.Event()
        self.load = 0  # records assigned and not finished (queued + in hand)
        self.task: asyncio.Task[None] | None = None


class PartitionWorker:
    """Handles one partition's records: the records of one key (one plan, one
    correlation) in order, one at a time; records of different keys on up to
    ``concurrency`` lanes at once.

    A record goes to the lane that holds an unfinished record of its key, else
    to an idle lane (a new one while fewer than ``concurrency`` exist), else it
    waits, in order, for the next lane to go idle: a slow record never holds
    back records of other keys while a lane is free. The consumer may commit
    past a record only once it and every record before it finished, and its
    dedup mark is stored when the mark is written in the background (its lane
    goes on meanwhile).

    The worker is given what it uses of its consumer: ``wants`` and ``handle``
    (the record handler's), ``done`` (records a partition's offset as handled),
    ``fail`` (a fatal error of a lane), and the ``group`` naming its tasks.
    """

    def __init__(
        self,
        tp: TopicPartition,
        concurrency: int = 1,
        *,
        group: str,
        wants: Wants,
        handle: Handle,
        done: Callable[[TopicPartition, int], None],
        fail: Callable[[BaseException], None],
    ) -> None:
        self.tp = tp
        self._group = group
        self._wants = wants
        self._handle = handle
        self._done = done
        self._fail = fail
        self.closed = False
        self.abandoned = False
        """The partition is gone (revoked, or its log began again): what finishes late is
        not committed."""
        self._concurrency = max(1, concurrency)
        self._lanes: list[_Lane] = []
        self._keys: dict[bytes | None, list[Any]] = {}  # key -> [lane, unfinished count]
        self._waiting: deque[ConsumerRecord[bytes, bytes]] = deque()
        self._waiting_keys: dict[bytes | None, int] = {}
        self._outstanding: deque[int] = deque()  # offsets fed, in order, not yet committable
        self._finished: set[int] = set()
        self._unstored: set[asyncio.Future[bool]] = set()  # marks written behind their lanes

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        """The lanes' tasks (to wait for, or cancel)."""
        return [lane.task for lane in self._lanes if lane.task is not None]

    @property
    def has_unstored(self) -> bool:
        """Whether records handled wait for their dedup marks to be stored."""
        return bool(self._unstored)

    async def settled(self) -> None:
        """Wait until the dedup marks of the records handled are stored or given up."""
        while self._unstored:
            await asyncio.wait(set(self._unstored))

    @property
    def backlog(self) -> int:
        """Records fetched and not yet handled."""
        return len(self._waiting) + sum(len(lane.queue) for lane in self._lanes)

    def feed(self, records: Iterable[ConsumerRecord[bytes, bytes]]) -> None:
        """Queue fetched records, each on its lane (or waiting for one); records no
        handler wants are done at once."""
        wants = self._wants
        outstanding = self._outstanding
        keys, waiting, waiting_keys = self._keys, self._waiting, self._waiting_keys
        skipped_to: int | None = None
        for record in records:
            if not wants(record):
                if outstanding:
                    outstanding.append(record.offset)
                    self._finished.add(record.offset)
                else:
                    skipped_to = record.offset
                continue
            if skipped_to is not None:
                self._done(self.tp, skipped_to)
                skipped_to = None
            outstanding.append(record.offset)
            key = record.key
            if key in waiting_keys:  # an earlier record of the key waits: keep order
                waiting.append(record)
                waiting_keys[key] += 1
                continue
            entry = keys.get(key)
            if entry is not None:
                lane = entry[0]
            elif waiting:
                # Records wait only while every lane is busy (a lane going idle takes
                # the first of them): no lane to look for.
                lane = None
            else:
                lane = self._idle_lane()
            if lane is None:
                waiting.append(record)
                waiting_keys[key] = 1
            else:
                self._assign(lane, record)
        if skipped_to is not None:
            self._done(self.tp, skipped_to)

    def close(self) -> None:
        """Finish the records in hand, drop the rest, and end."""
        self.closed = True
        self._waiting.clear()
        self._waiting_keys.clear()
        for lane in self._lanes:
            lane.load -= len(lane.queue)
            lane.queue.clear()
            lane.ready.set()

    def _assign(self, lane: _Lane, record: ConsumerRecord[bytes, bytes]) -> None:
        entry = self._keys.get(record.key)
        if entry is None:
            self._keys[record.key] = [lane, 1]
        else:
            entry[1] += 1
        lane.queue.append(record)
        lane.load += 1
        lane.ready.set()

    def _idle_lane(self) -> _Lane | None:
        lanes = self._lanes
        for lane in lanes:
            if lane.load == 0:
                return lane
        if len(lanes) >= self._concurrency:
            return None
        lane = _Lane()
        lane.task = asyncio.create_task(
            self._run(lane),
            name=f"disco-{self._group}-{self.tp.topic}-{self.tp.partition}-{len(lanes)}",
        )
        lanes.append(lane)
        return lane

    def _finished_later(self, offset: int, stored: asyncio.Future[bool]) -> None:
        """A record handled whose dedup mark is written in the background: its offset
        becomes committable once the mark is stored (never, when it was given up: the
        record comes again)."""
        if stored.done():
            if stored.result():
                self._committable(offset)
        else:
            self._unstored.add(stored)
            stored.add_done_callback(functools.partial(self._mark_stored, offset))

    def _mark_stored(self, offset: int, stored: asyncio.Future[bool]) -> None:
        self._unstored.discard(stored)
        if stored.result() and not self.abandoned:
            self._committable(offset)

    def _committable(self, offset: int) -> None:
        outstanding = self._outstanding
        if outstanding and outstanding[0] == offset:
            done = outstanding.popleft()
            finished = self._finished
            while outstanding and outstanding[0] in finished:
                done = outstanding.popleft()
                finished.discard(done)
            self._done(self.tp, done)
        else:
            self._finished.add(offset)

    async def _run(self, lane: _Lane) -> None:
        # The bookkeeping of a record finished is inlined (once per record): its key's
        # count and the next waiting record.
        handle = self._handle
        queue = lane.queue
        keys, waiting, waiting_keys = self._keys, self._waiting, self._waiting_keys
        try:
            while True:
                if not queue:
                    if self.closed:
                        return
                    lane.ready.clear()
                    await lane.ready.wait()
                    continue
                record = queue.popleft()
                stored = await handle(record)
                lane.load -= 1
                key = record.key
                entry = keys.get(key)
                if entry is not None:
                    if entry[1] <= 1:
                        del keys[key]
                    else:
                        entry[1] -= 1
                if stored is None:
                    self._committable(record.offset)
                else:
                    self._finished_later(record.offset, stored)
                # Idle: take the next waiting record (records of keys other lanes hold
                # join those lanes on the way).
                while waiting and lane.load == 0:
                    record = waiting.popleft()
                    key = record.key
                    left = waiting_keys[key] - 1
                    if left:
                        waiting_keys[key] = left
                    else:
                        del waiting_keys[key]
                    entry = keys.get(key)
                    if entry is None:
                        keys[key] = [lane, 1]
                        queue.append(record)  # this lane's: it runs, no wake-up
                        lane.load += 1
                    else:
                        self._assign(entry[0], record)
        except Abandoned:
            return
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaced through run(), never swallowed
            self._fail(exc)


class Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Tells the consumer when the group takes partitions away (``revoked``) or
    gives it some (``assigned``)."""

    def __init__(
        self,
        revoked: Callable[[set[TopicPartition]], Awaitable[None]],
        assigned: Callable[[set[TopicPartition]], None],
    ) -> None:
        self._revoked = revoked
        self._assigned = assigned

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._assigned(set(assigned))


async def finish(task: asyncio.Task[None], seconds: float) -> None:
    """Let ``task`` finish for up to ``seconds``, then cancel it; wait for its end."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), seconds)
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def finish_all(tasks: list[asyncio.Task[None]], seconds: float) -> None:
    """Let ``tasks`` finish for up to ``seconds``, then cancel the late ones; wait for all."""
    if not tasks:
        return
    _, late = await asyncio.wait(tasks, timeout=seconds)
    for task in late:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
