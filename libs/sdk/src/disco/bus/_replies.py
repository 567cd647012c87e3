"""A group-less listener that resolves waiting requests by ``correlation_id``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence

import structlog

from disco.bus._credentials import tenant_guard
from disco.bus._errors import BusError, BusNotStartedError
from disco.bus._reader import ReadRecord, TopicReader
from disco.settings import BusSettings
from disco_common.auth import UNAUTHENTICATED_TENANT
from disco_common.envelope import (
    BINARY_HEADER_PREFIX,
    WIRE_NAMES,
    Envelope,
    EnvelopeError,
    envelope_class_for,
    is_binary_mode,
    wire_attribute,
)

__all__ = ["ReplyListener"]

_log = structlog.get_logger("disco.bus")

_CORRELATION_HEADER = BINARY_HEADER_PREFIX + WIRE_NAMES["correlation_id"]


class ReplyListener:
    """Reads every partition of one response topic without joining a consumer group.

    It starts at the end of the topic (positions taken with ``end_offsets``, so
    nothing already there is replayed) and hands each envelope whose
    ``correlation_id`` someone waits for to that waiter. Register a waiter with
    :meth:`expect` *before* publishing the request: the listener is already
    positioned by then, so a response cannot slip past it.

    A response is taken only from the tenant the request was made for, and,
    where tenant credentials are required, only when a valid credential vouches
    for that tenant (as every consumer requires): anyone who can read a request
    can copy its correlation id, so anything else is logged and passed over, and
    the waiter goes on waiting for the real answer.
    """

    def __init__(self, settings: BusSettings, topic: str) -> None:
        self._settings = settings
        self.topic = topic
        self._kind = envelope_class_for(topic)
        self._name = f"{settings.topic_prefix}{topic}"
        self._reader: TopicReader | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiters: dict[str, tuple[asyncio.Future[Envelope], str | None]] = {}
        self._guard = tenant_guard(settings)
        self._failure: BaseException | None = None
        self._lock = asyncio.Lock()

    @property
    def fetch_wait_ms(self) -> int | None:
        """How long the broker may hold the next fetch (short while a reply is awaited,
        longer while idle); None when not started."""
        reader = self._reader
        return reader.pacer.current_wait_ms if reader is not None else None

    @property
    def running(self) -> bool:
        """Whether the listener is positioned and reading."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Assign every partition of the topic and position at its end (idempotent)."""
        async with self._lock:
            if self._reader is not None:
                return
            # A short metadata wait: a response topic provisioned a moment ago may
            # not show yet, but a missing one should fail a request quickly.
            reader = TopicReader(self._settings, [self.topic], metadata_timeout=3.0)
            await reader.start()
            self._reader = reader
            self._failure = None
            self._task = asyncio.create_task(
                self._listen(reader), name=f"disco-replies-{self.topic}"
            )

    async def stop(self) -> None:
        """Stop reading; waiters still pending fail with :class:`BusNotStartedError`."""
        async with self._lock:
            task, self._task = self._task, None
            reader, self._reader = self._reader, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if reader is not None:
                await reader.stop()
            self._fail_all(BusNotStartedError("the reply listener was stopped"))

    @contextlib.asynccontextmanager
    async def expect(
        self, correlation_id: str, *, tenant_id: str | None = None
    ) -> AsyncIterator[asyncio.Future[Envelope]]:
        """A future for the first envelope carrying ``correlation_id`` from ``tenant_id``
        (the request's tenant).

        Enter it before publishing the request; it is forgotten on exit.
        """
        if self._failure is not None:
            raise BusError(f"the reply listener on {self._name!r} failed") from self._failure
        if not self.running:
            raise BusNotStartedError("the reply listener is not running: call start() first")
        if correlation_id in self._waiters:
            raise BusError(f"a request with correlation_id {correlation_id!r} is already waiting")
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        self._waiters[correlation_id] = (future, tenant_id)
        reader = self._reader
        assert reader is not None
        try:
            with reader.pacer.urgent():
                yield future
        finally:
            self._waiters.pop(correlation_id, None)
            if not future.done():
                future.cancel()

    async def _listen(self, reader: TopicReader) -> None:
        try:
            while True:
                records = await reader.read(timeout=1.0)
                if not self._waiters:
                    continue
                for record in records:
                    waiter = self._waiter_of(record)
                    if waiter is not None:
                        await self._offer(record, *waiter)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log.error("reply listener failed", topic=self._name, error=repr(exc))
            self._failure = exc
            self._fail_all(exc)

    def _waiter_of(self, record: ReadRecord) -> tuple[asyncio.Future[Envelope], str | None] | None:
        # Only the correlation id matters until it matches a waiter: skip the
        # full validation of everyone else's responses.
        headers: Sequence[tuple[str, bytes]] = record.headers
        correlation_id: object
        if is_binary_mode(headers):
            correlation_id = next(
                (v.decode("utf-8", "replace") for n, v in headers if n == _CORRELATION_HEADER),
                None,
            )
        else:
            try:
                document = json.loads(record.value or b"null")
                correlation_id = wire_attribute(document, "correlation_id")
            except (ValueError, AttributeError):
                return None
        waiter = self._waiters.get(correlation_id) if isinstance(correlation_id, str) else None
        if waiter is None or waiter[0].done():
            return None
        return waiter

    async def _offer(
        self, record: ReadRecord, future: asyncio.Future[Envelope], expected: str | None
    ) -> None:
        try:
            envelope = self._kind.from_kafka_record(record.value, record.headers)
        except EnvelopeError as exc:
            _log.warning("malformed response ignored", topic=self._name, reason=exc.reason)
            return
        refused: str | None = None
        if expected is not None and envelope.tenant_id != expected:
            refused = f"a response for tenant {envelope.tenant_id!r} to a request of {expected!r}"
        elif self._guard is not None:
            refused = await self._guard.refusal(envelope.tenant_id, record.headers)
        if refused:
            _log.warning(
                UNAUTHENTICATED_TENANT,
                topic=self._name,
                correlation_id=envelope.correlation_id,
                reason=refused,
            )
            return
        if not future.done():
            future.set_result(envelope)

    def _fail_all(self, exc: BaseException) -> None:
        for future, _ in self._waiters.values():
            if not future.done():
                future.set_exception(exc)
