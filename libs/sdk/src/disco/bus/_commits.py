"""A consumer group's offsets: what each partition has handled, and the commits
that make it durable (at most one per interval, retried while the broker is away)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from disco.bus._client import BusClient
from disco.bus._polling import broker_kind

__all__ = ["CommitHost", "OffsetCommitter", "commit_offsets"]

_log = structlog.get_logger("disco.bus")

_SLOW_COMMIT_SECONDS = 0.5


class CommitHost(Protocol):
    """What an :class:`OffsetCommitter` reads of its consumer
    (:class:`~disco.bus.BusConsumer` satisfies it)."""

    @property
    def group(self) -> str:
        """The consumer group (names the commit loop's task)."""
        ...

    @property
    def client(self) -> BusClient:
        """The bus client (its settings hold the commit interval)."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether the consumer is stopping (a failed commit is not tried again)."""
        ...


class OffsetCommitter:
    """Commits the offsets one :class:`~disco.bus.BusConsumer` has handled.

    A partition's offset is recorded once its record and every record before it
    finished (:meth:`record_done`); a loop commits what was recorded, at most
    once per ``BusSettings.commit_interval_ms`` (spaced on Kafka, not on the embedded
    broker), and :meth:`commit` commits at once (on
    stop and rebalance). Only partitions the member still owns are committed,
    and only past what was committed before. A commit the group rejects after a
    rebalance is dropped (the new owner reads again, as at-least-once allows);
    another failed commit is tried again unless the consumer is stopping. An
    error that ends the commit loop goes to ``fail``.
    """

    def __init__(self, owner: CommitHost, fail: Callable[[BaseException], None]) -> None:
        self._owner = owner
        self._fail = fail
        self._done: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._wanted = asyncio.Event()
        self._lock = asyncio.Lock()
        self._loop: asyncio.Task[None] | None = None

    def start(self, consumer: AIOKafkaConsumer) -> None:
        """Forget the offsets of a previous run and start committing ``consumer``'s."""
        self._done.clear()
        self._committed.clear()
        self._loop = asyncio.create_task(
            self._commit_loop(consumer), name=f"disco-commit-{self._owner.group}"
        )

    async def stop(self) -> None:
        """End the commit loop (a final :meth:`commit` is the caller's)."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None

    def record_done(self, tp: TopicPartition, offset: int) -> None:
        """``offset`` of ``tp`` and every record before it are handled."""
        self._done[tp] = offset + 1
        self._wanted.set()

    def handled(self, tp: TopicPartition) -> int | None:
        """The offset after the last record handled on ``tp``, if one was."""
        return self._done.get(tp)

    def forget(self, tp: TopicPartition) -> None:
        """Drop what is known of ``tp`` (revoked, or its log began again)."""
        self._done.pop(tp, None)
        self._committed.pop(tp, None)

    async def _commit_loop(self, consumer: AIOKafkaConsumer) -> None:
        # At most one commit per interval: under load, one commit covers many
        # records (each commit is a write at the broker); stop() and a rebalance
        # commit at once whatever the interval.
        settings = self._owner.client.settings
        try:
            interval = settings.commit_interval_ms(await broker_kind(settings)) / 1000
            while True:
                await self._wanted.wait()
                self._wanted.clear()
                await self.commit(consumer)
                if interval:
                    await asyncio.sleep(interval)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(exc)

    async def commit(
        self, consumer: AIOKafkaConsumer, only: Iterable[TopicPartition] | None = None
    ) -> None:
        """Commit what was handled on the owned partitions (of ``only``, if given)."""
        async with self._lock:
            owned = consumer.assignment()
            wanted = set(only) if only is not None else set(self._done)
            offsets = {
                tp: offset
                for tp, offset in self._done.items()
                if tp in wanted and tp in owned and offset > self._committed.get(tp, -1)
            }
            if not offsets:
                return
            try:
                await commit_offsets(consumer, offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                # The group rebalanced under us: the new owner re-reads from the
                # last committed offset, which at-least-once allows.
                _log.warning("commit rejected after a rebalance", error=repr(exc))
                return
            except KafkaError as exc:
                _log.warning("commit failed, will retry", error=repr(exc))
                if not self._owner.stopping:
                    await asyncio.sleep(0.2)
                    self._wanted.set()
                return
            self._committed.update(offsets)


async def commit_offsets(consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int]) -> None:
    """``consumer.commit(offsets)``; one still running after half a second gets the
    cluster's metadata refreshed.

    aiokafka retries a commit inside ``commit()`` for as long as the broker answers
    with a retriable error. The one that lasts is ``UnknownTopicOrPartition`` from a
    broker that lost the topic (the embedded one keeps topics in memory and comes
    back empty after a restart): it is created again only when a client asks for its
    metadata, which the periodic refresh did up to ``DISCO_KAFKA_METADATA_MAX_AGE_MS``
    later, and meanwhile the consumer neither committed nor saw its new partitions.
    aiokafka's consumer has no public way to ask for metadata (its client does).
    """
    commit = asyncio.ensure_future(consumer.commit(offsets))
    try:
        done, _ = await asyncio.wait({commit}, timeout=_SLOW_COMMIT_SECONDS)
    except BaseException:
        commit.cancel()  # as a plain await would have
        raise
    if not done:
        consumer._client.force_metadata_update()
    await commit
