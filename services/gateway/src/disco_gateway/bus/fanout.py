"""Group-less readers per gateway instance, fanned out to whoever waits in them.

Everything the gateway streams live (an A2A task's progress and answer) is read
once per instance, without joining a consumer group (it takes nobody's work and
sees every partition), and handed to the inboxes subscribed to it by a key: an
envelope attribute and its value (``("correlation_id", "…")``,
``("task_id", "…")``, ``("session_id", "…")``).

Each topic has its own reader (its own fetches and fetch wait): a blocking
request waits for its answer on ``action-results`` alone, with the shortest
fetch wait on that topic only, as the SDK's reply listener does; a fetch of
one topic's partitions is cheaper on the embedded broker than one of three
topics', so the answer is seen sooner. A topic another part of the instance
already reads (``notification-events``: the session hub reads it, see
:mod:`disco_gateway.sessions.hub`) is not read twice: that reader feeds the
fan-out (:meth:`BusFanout.feed`).

Records are routed by their ``ce_type`` header first; only the ones of a type a
route wants are parsed, and only far enough to read the keys until an inbox
waits for one. The readers start at the end of the topics when the instance
starts (a feeding reader that starts earlier, from stored positions, hands
over only what comes after the end it found): subscribe before publishing what
will be answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from disco.bus import FetchPacer, ReadRecord, TopicReader, tenant_guard
from disco.settings import BusSettings
from disco_common.auth import UNAUTHENTICATED_TENANT
from disco_common.envelope import (
    Envelope,
    EnvelopeError,
    binary_attributes,
    envelope_class_for,
    is_binary_mode,
    wire_attribute,
)

__all__ = ["BusFanout", "Delivery", "FanoutFeed", "FanoutRoute", "Inbox", "Key"]

_log = structlog.get_logger("disco_gateway.bus")

Key = tuple[str, str]
"""A subscription key: an envelope attribute and its value."""


@dataclass(frozen=True)
class FanoutRoute:
    """What to read of one topic: which event types, keyed by which attributes."""

    topic: str
    event_types: frozenset[str] | None
    """The types to hand out (None: every type)."""
    keys: tuple[str, ...]
    """The envelope attributes subscribers key on, e.g. ``("correlation_id", "task_id")``."""
    fed: bool = False
    """Read by someone else, who feeds it (:meth:`BusFanout.feed`), not by the fan-out."""


@dataclass(frozen=True)
class Delivery:
    """One envelope handed to an inbox, with the (logical) topic it came from."""

    topic: str
    envelope: Envelope


class Inbox:
    """What arrives for a subscription, in the order it was read."""

    def __init__(self, keys: frozenset[Key]) -> None:
        self.keys = keys
        self._queue: asyncio.Queue[Delivery | BaseException] = asyncio.Queue()

    def _put(self, item: Delivery | BaseException) -> None:
        self._queue.put_nowait(item)

    async def get(self) -> Delivery:
        """The next delivery (waits).

        Raises:
            BaseException: the reader failed for good (the instance is stopping).
        """
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item


class FanoutFeed:
    """A reader the fan-out does not own handing over what it reads of one topic.

    Its owner calls :meth:`attach` once it is positioned and :meth:`offer` with
    every batch it reads.
    """

    def __init__(self, fanout: BusFanout, topic: str) -> None:
        self._fanout = fanout
        self.topic = topic
        self.pacer: FetchPacer | None = None
        self._before: dict[int, int] = {}

    def attach(self, pacer: FetchPacer, ends: Mapping[tuple[str, int], int]) -> None:
        """The feeding reader is positioned: ``pacer`` sets its fetch waits, ``ends`` are
        its partitions' end offsets when it started (what lies before them was there
        before this instance, and is not handed out)."""
        self.pacer = pacer
        self._before = {
            partition: end for (topic, partition), end in ends.items() if topic == self.topic
        }

    async def offer(self, records: Sequence[ReadRecord]) -> None:
        """Hand out what the feeding reader read (records of other topics are ignored)."""
        fanout = self._fanout
        if not fanout._inboxes:
            return
        before = self._before
        for record in records:
            if record.topic != self.topic:
                continue
            if before:
                end = before.get(record.partition)
                if end is not None:
                    if record.offset < end:
                        continue
                    del before[record.partition]
            await fanout._offer(record)


class BusFanout:
    """The instance's group-less readers (see the module docs).

    Args:
        settings: how to reach the bus.
        routes: what to read, per topic.
    """

    def __init__(self, settings: BusSettings, routes: Sequence[FanoutRoute]) -> None:
        if not routes:
            raise ValueError("a fan-out needs at least one route")
        self._settings = settings
        self._routes = {route.topic: route for route in routes}
        self._inboxes: dict[Key, set[Inbox]] = {}
        self._readers: dict[str, TopicReader] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._feeds = {route.topic: FanoutFeed(self, route.topic) for route in routes if route.fed}
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(settings)

    def feed(self, topic: str) -> FanoutFeed:
        """How the reader that reads ``topic`` for the fan-out (a ``fed`` route) feeds it."""
        try:
            return self._feeds[topic]
        except KeyError:
            raise ValueError(f"the fan-out reads {topic!r} itself (or not at all)") from None

    async def start(self) -> None:
        """Position a reader at the end of every topic not fed, start reading (idempotent)."""
        if self._tasks:
            return
        try:
            for topic, route in self._routes.items():
                if route.fed:
                    continue
                reader = TopicReader(self._settings, [topic])
                await reader.start()
                self._readers[topic] = reader
                self._tasks.append(
                    asyncio.create_task(self._read(reader), name=f"disco-gateway-fanout-{topic}")
                )
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop reading; waiting inboxes get an error (idempotent)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            await reader.stop()
        closed = ConnectionAbortedError("the gateway's bus reader stopped")
        for inboxes in self._inboxes.values():
            for inbox in inboxes:
                inbox._put(closed)

    @contextlib.asynccontextmanager
    async def subscribe(
        self, keys: Iterable[Key], *, awaiting: Iterable[str] | None = None
    ) -> AsyncIterator[Inbox]:
        """An inbox for every envelope carrying any of ``keys``, until the block exits.

        Someone waits for an answer while an inbox is open: the readers of the
        ``awaiting`` topics (all topics when None) fetch with their shortest wait
        meanwhile (a pacer backs off only while nobody waits on its topic). What
        comes on the other topics is handed out all the same, at their readers' pace.
        """
        inbox = Inbox(frozenset(keys))
        for key in inbox.keys:
            self._inboxes.setdefault(key, set()).add(inbox)
        try:
            with self._urgent(self._routes if awaiting is None else awaiting):
                yield inbox
        finally:
            for key in inbox.keys:
                waiting = self._inboxes.get(key)
                if waiting is not None:
                    waiting.discard(inbox)
                    if not waiting:
                        del self._inboxes[key]

    @contextlib.contextmanager
    def _urgent(self, topics: Iterable[str]) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for topic in topics:
                pacer = self._pacer(topic)
                if pacer is not None:
                    stack.enter_context(pacer.urgent())
            yield

    def _pacer(self, topic: str) -> FetchPacer | None:
        reader = self._readers.get(topic)
        if reader is not None:
            return reader.pacer
        feed = self._feeds.get(topic)
        return feed.pacer if feed is not None else None

    def add_keys(self, inbox: Inbox, keys: Iterable[Key]) -> None:
        """Let ``inbox`` also receive what carries ``keys`` (it is removed with the inbox)."""
        added = frozenset(keys) - inbox.keys
        inbox.keys = inbox.keys | added
        for key in added:
            self._inboxes.setdefault(key, set()).add(inbox)

    async def _read(self, reader: TopicReader) -> None:
        while True:
            try:
                records = await reader.read(timeout=0.5)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker hiccup: aiokafka reconnects by itself
                _log.warning("bus reader failed; reading on", error=repr(exc))
                await asyncio.sleep(0.5)
                continue
            if not self._inboxes:
                continue
            for record in records:
                await self._offer(record)

    async def _offer(self, record: ReadRecord) -> None:
        route = self._routes.get(record.topic)
        if route is None:
            return
        if route.event_types is not None:
            ce_type = next((value for name, value in record.headers if name == "ce_type"), None)
            if ce_type is None or ce_type.decode("utf-8", "replace") not in route.event_types:
                return
        try:
            if is_binary_mode(record.headers):
                document: Any = binary_attributes(record.value, record.headers)
            else:
                document = json.loads(record.value or b"null")
        except ValueError:
            return
        if not isinstance(document, dict):
            return
        targets: set[Inbox] = set()
        for attribute in route.keys:
            value = wire_attribute(document, attribute)
            if isinstance(value, str):
                targets |= self._inboxes.get((attribute, value), set())
        if not targets:
            return
        try:
            envelope = envelope_class_for(record.topic).model_validate(document)
        except ValueError as exc:
            reason = exc.reason if isinstance(exc, EnvelopeError) else str(exc)[:300]
            _log.warning("malformed envelope skipped", topic=record.topic, reason=reason)
            return
        if self._guard is not None and (
            refused := await self._guard.refusal(envelope.tenant_id, record.headers)
        ):
            # Group-less: dropped here; the consumer groups of the topic dead-letter it.
            _log.warning(UNAUTHENTICATED_TENANT, topic=record.topic, reason=refused)
            return
        delivery = Delivery(record.topic, envelope)
        for inbox in targets:
            inbox._put(delivery)
