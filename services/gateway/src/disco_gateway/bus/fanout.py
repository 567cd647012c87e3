"""One group-less reader per gateway instance, fanned out to whoever waits in it.

Everything the gateway streams live (an A2A task's progress and answer; later
a UI session's events) is read once per instance, without joining a consumer
group (it takes nobody's work and sees every partition), and handed to the
inboxes subscribed to it by a key: an envelope attribute and its value
(``("correlation_id", "…")``, ``("task_id", "…")``, ``("session_id", "…")``).

Records are routed by their ``ce_type`` header first; only the ones of a type a
route wants are parsed, and only far enough to read the keys until an inbox
waits for one. The reader starts at the end of the topics when the instance
starts: subscribe before publishing what will be answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from disco.bus import ReadRecord, TopicReader, tenant_guard
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

__all__ = ["BusFanout", "Delivery", "FanoutRoute", "Inbox", "Key"]

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


class BusFanout:
    """The instance's group-less reader (see the module docs).

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
        self._reader: TopicReader | None = None
        self._task: asyncio.Task[None] | None = None
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(settings)

    async def start(self) -> None:
        """Position at the end of every topic and start reading (idempotent)."""
        if self._task is not None:
            return
        reader = TopicReader(self._settings, list(self._routes))
        await reader.start()
        self._reader = reader
        self._task = asyncio.create_task(self._read(reader), name="disco-gateway-fanout")

    async def stop(self) -> None:
        """Stop reading; waiting inboxes get an error (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()
        closed = ConnectionAbortedError("the gateway's bus reader stopped")
        for inboxes in self._inboxes.values():
            for inbox in inboxes:
                inbox._put(closed)

    @contextlib.asynccontextmanager
    async def subscribe(self, keys: Iterable[Key]) -> AsyncIterator[Inbox]:
        """An inbox for every envelope carrying any of ``keys``, until the block exits.

        Someone waits for an answer while an inbox is open: the reader fetches with
        its shortest wait meanwhile (the pacer backs off only while nobody waits).
        """
        inbox = Inbox(frozenset(keys))
        for key in inbox.keys:
            self._inboxes.setdefault(key, set()).add(inbox)
        reader = self._reader
        try:
            with reader.pacer.urgent() if reader is not None else contextlib.nullcontext():
                yield inbox
        finally:
            for key in inbox.keys:
                waiting = self._inboxes.get(key)
                if waiting is not None:
                    waiting.discard(inbox)
                    if not waiting:
                        del self._inboxes[key]

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
