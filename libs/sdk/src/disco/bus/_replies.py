"""A group-less listener that resolves waiting requests by ``correlation_id``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence

import structlog

from disco.bus._credentials import tenant_guard
from disco.bus._errors import BusError, BusNotStartedError, CorrelationInUseError
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

QUIET_WAIT_MS = 5
"""An adaptive listener nobody waits on stops fetching once its wait reaches this
(with the default back-off, after 100 ms without a waiter): a request after that
pays one short fetch (for the partitions' high watermarks) instead of a fetch held
at the broker for up to the idle wait."""


class ReplyListener:
    """Reads every partition of one response topic without joining a consumer group.

    It starts at the end of the topic (positions taken with ``end_offsets``, so
    nothing already there is replayed) and hands each envelope whose
    ``correlation_id`` someone waits for to that waiter. Register a waiter with
    :meth:`expect` *before* publishing the request: the listener is already
    positioned by then, so a response cannot slip past it.

    While nobody waits and its fetch wait has grown to :data:`QUIET_WAIT_MS` (on a
    broker that does not long-poll, the embedded one), the listener stops fetching
    altogether: an idle listener costs neither it nor the broker anything, and the
    next :meth:`expect` does not find a fetch held at the broker for the idle wait
    (up to ``kafka_fetch_max_wait_ms``) in its way. It then positions every
    partition at its end again (the high watermarks of one short fetch, before the
    request leaves) and fetches at the shortest wait. What was written meanwhile was for
    nobody here.

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
        # By correlation id, then by the tenant the answer must come from (None: any):
        # two tenants may wait on one correlation id (their own choice of it).
        self._waiters: dict[str, dict[str | None, asyncio.Future[Envelope]]] = {}
        self._guard = tenant_guard(settings)
        self._failure: BaseException | None = None
        self._lock = asyncio.Lock()
        # Quiet: fetching stopped while nobody waits (see the class docs).
        self._quiet = False
        self._wanted = asyncio.Event()
        self._waking = asyncio.Lock()

    @property
    def fetch_wait_ms(self) -> int | None:
        """How long the broker may hold the next fetch (short while a reply is awaited,
        longer while idle); None when not started."""
        reader = self._reader
        return reader.pacer.current_wait_ms if reader is not None else None

    @property
    def quiet(self) -> bool:
        """Whether the listener stopped fetching because nobody waits (see the class docs)."""
        return self._quiet

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
            self._quiet = False
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
        (the request's tenant; None: from any).

        Enter it before publishing the request; it is forgotten on exit.

        Raises:
            CorrelationInUseError: a request of the same tenant waits on ``correlation_id``.
        """
        if self._failure is not None:
            raise BusError(f"the reply listener on {self._name!r} failed") from self._failure
        if not self.running:
            raise BusNotStartedError("the reply listener is not running: call start() first")
        by_tenant = self._waiters.setdefault(correlation_id, {})
        if tenant_id in by_tenant:
            raise CorrelationInUseError(correlation_id, tenant_id)
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        by_tenant[tenant_id] = future
        reader = self._reader
        assert reader is not None
        try:
            with reader.pacer.urgent():
                if self._quiet:
                    await self._wake(reader)
                yield future
        finally:
            del by_tenant[tenant_id]
            if not by_tenant:
                del self._waiters[correlation_id]
            if not future.done():
                future.cancel()

    async def _wake(self, reader: TopicReader) -> None:
        """Fetch again (from the end) for a waiter that found the listener quiet."""
        async with self._waking:
            if self._quiet:
                await reader.resume_at_end()
                self._quiet = False
                self._wanted.set()

    def _should_quiet(self, reader: TopicReader) -> bool:
        pacer = reader.pacer
        return (
            not self._waiters
            and pacer.adaptive
            and pacer.wait_ms() >= max(QUIET_WAIT_MS, pacer.min_wait_ms + 1)
        )

    async def _listen(self, reader: TopicReader) -> None:
        try:
            while True:
                if self._should_quiet(reader):
                    # No await between the check and the pause: a waiter registered
                    # from now on finds the listener quiet and wakes it.
                    reader.pause()
                    self._quiet = True
                    self._wanted.clear()
                    await self._wanted.wait()
                    continue
                # Short reads (the fetches go on meanwhile), so that quiet comes when
                # it is due, also right after the last waiter was answered.
                records = await reader.read(timeout=0.05)
                if not self._waiters:
                    continue
                for record in records:
                    waiters = self._waiter_of(record)
                    if waiters is not None:
                        await self._offer(record, waiters)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log.error("reply listener failed", topic=self._name, error=repr(exc))
            self._failure = exc
            self._fail_all(exc)

    def _waiter_of(self, record: ReadRecord) -> dict[str | None, asyncio.Future[Envelope]] | None:
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
        waiters = self._waiters.get(correlation_id) if isinstance(correlation_id, str) else None
        if not waiters or all(future.done() for future in waiters.values()):
            return None
        return waiters

    async def _offer(
        self, record: ReadRecord, waiters: dict[str | None, asyncio.Future[Envelope]]
    ) -> None:
        try:
            envelope = self._kind.from_kafka_record(record.value, record.headers)
        except EnvelopeError as exc:
            _log.warning("malformed response ignored", topic=self._name, reason=exc.reason)
            return
        refused: str | None = None
        future = waiters.get(envelope.tenant_id)
        if future is None:
            future = waiters.get(None)  # a waiter that takes an answer from any tenant
        if future is None:
            expected = ", ".join(sorted(repr(t) for t in waiters if t is not None))
            refused = f"a response for tenant {envelope.tenant_id!r} to a request of {expected}"
        elif future.done():
            return  # answered already: a second delivery of its answer
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
        assert future is not None
        if not future.done():
            future.set_result(envelope)

    def _fail_all(self, exc: BaseException) -> None:
        for waiters in self._waiters.values():
            for future in waiters.values():
                if not future.done():
                    future.set_exception(exc)
