"""Publish after commit: a transactional outbox per service schema (STYLE 8).

A route or service calls :func:`publish_after_commit` with its session: the
envelope is written to ``<schema>.outbox`` in the same transaction. If the
transaction rolls back, the row goes with it and nothing is ever published.
Once it commits, the :class:`OutboxRelay` is woken; it publishes the rows with
the bus and deletes them. The relay also sweeps on a timer, which picks up rows
left by a process that died between its commit and its publish.

Rows are claimed with ``FOR UPDATE SKIP LOCKED``, so any number of instances
can relay the same schema without publishing a row twice (short of a crash
between publish and delete: delivery is at-least-once, and consumers
deduplicate on the envelope id).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools

import structlog
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco.bus import BusClient, MessageTooLargeError
from disco_common.envelope import Envelope, EnvelopeError
from disco_common.topics import Topic
from disco_service._db import _SCHEMA_KEY, _TENANT_KEY, OUTBOX_PENDING_KEY, Database
from disco_service._metrics import ServiceMetrics

__all__ = ["OutboxRelay", "outbox_envelope", "publish_after_commit"]

log = structlog.get_logger("disco_service.outbox")

_propagator = TraceContextTextMapPropagator()


def _current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")


@functools.cache
def _insert_statement(schema: str) -> TextClause:
    # One statement object per schema (a service has one): built once, not per event.
    return text(
        f'INSERT INTO "{schema}".outbox (topic, envelope, tenant_id) '  # noqa: S608 - schema is a checked identifier
        "VALUES (:topic, CAST(:envelope AS jsonb), :tenant)"
    )


def outbox_envelope(envelope: Envelope, tenant_id: str | None) -> Envelope:
    """``envelope`` as the outbox stores it for a transaction acting for ``tenant_id``.

    It gets the tenant when it has none, and the current trace context as
    ``traceparent`` when it has none. :func:`publish_after_commit` uses it; a
    service whose own SQL writes the outbox row (one statement for a whole
    request) prepares its envelope with it, writes
    ``envelope.model_dump_json(exclude_none=True)`` with ``tenant_id`` to
    ``<schema>.outbox``, and calls :meth:`Database.notify_outbox_commit` once
    that committed.

    Raises:
        ValueError: the envelope names another tenant than ``tenant_id``.
    """
    changes: dict[str, str] = {}
    if envelope.tenant_id is None and tenant_id:
        changes["tenant_id"] = tenant_id
    elif tenant_id and envelope.tenant_id != tenant_id:
        raise ValueError(
            f"envelope is for tenant {envelope.tenant_id!r} but the session acts for {tenant_id!r}"
        )
    if envelope.traceparent is None:
        traceparent = _current_traceparent()
        if traceparent is not None:
            changes["traceparent"] = traceparent
    return envelope.with_changes(**changes) if changes else envelope


async def publish_after_commit(
    session: AsyncSession, topic: Topic | str, envelope: Envelope
) -> Envelope:
    """Publish ``envelope`` on ``topic`` once ``session``'s transaction commits.

    ``topic`` is the logical name (the bus adds ``DISCO_TOPIC_PREFIX``). The
    envelope gets the session's tenant when it has none, and the current trace
    context as ``traceparent`` when it has none, so the consumer's span
    continues the request's trace.

    Returns:
        The envelope as it will be published.

    Raises:
        ValueError: the envelope names another tenant than the session's, or
            ``session`` was not made by the kit.
    """
    schema = session.info.get(_SCHEMA_KEY)
    if schema is None:
        raise ValueError(
            "publish_after_commit needs a session from the kit (SessionDep or "
            "Database.unit_of_work), which knows the service's outbox"
        )
    envelope = outbox_envelope(envelope, session.info.get(_TENANT_KEY))
    await session.execute(
        _insert_statement(schema),
        {
            "topic": str(topic),
            "envelope": envelope.model_dump_json(exclude_none=True),
            "tenant": envelope.tenant_id,
        },
    )
    session.info[OUTBOX_PENDING_KEY] = True
    return envelope


class OutboxRelay:
    """Publishes committed outbox rows of one schema, then deletes them.

    :meth:`start` registers it to be woken after every commit that wrote to
    the outbox and starts its loop; :meth:`stop` drains what it can and ends
    the loop. :meth:`drain` publishes everything pending right now.
    """

    def __init__(
        self,
        database: Database,
        bus: BusClient,
        *,
        batch_size: int = 100,
        sweep_interval_seconds: float = 5.0,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self._database = database
        self._bus = bus
        self._batch_size = batch_size
        self._sweep_interval = sweep_interval_seconds
        self._metrics = metrics
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._registered = False
        schema = database.schema
        self._claim = text(
            f'SELECT id, topic, envelope FROM "{schema}".outbox '  # noqa: S608 - checked identifier
            "ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED"
        )
        self._delete = text(f'DELETE FROM "{schema}".outbox WHERE id = ANY(:ids)')  # noqa: S608

    def notify(self) -> None:
        """Wake the loop: rows were just committed."""
        self._wake.set()

    async def start(self) -> None:
        """Start the loop (idempotent). Its first round sweeps leftovers."""
        if self._task is not None:
            return
        if not self._registered:
            self._database.on_outbox_commit(self.notify)
            self._registered = True
        self._stopping = False
        self._wake.set()
        self._task = asyncio.create_task(self._run(), name=f"outbox-relay-{self._database.schema}")

    async def stop(self, grace: float = 5.0) -> None:
        """End the loop after one last drain (bounded by ``grace`` seconds). Idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(task, timeout=grace)
        except TimeoutError:
            log.warning("outbox_relay_stop_timeout", schema=self._database.schema, grace=grace)

    async def drain(self) -> int:
        """Publish every row pending now, in commit order; the number published."""
        total = 0
        while True:
            published, claimed = await self._publish_batch()
            total += published
            if claimed < self._batch_size:
                return total

    async def _publish_batch(self) -> tuple[int, int]:
        error: BaseException | None = None
        done: list[int] = []
        dropped: list[int] = []
        async with self._database.unit_of_work(None) as session:
            rows = (await session.execute(self._claim, {"limit": self._batch_size})).all()
            # Queue the whole batch, then wait for the acknowledgements: one
            # round trip per batch rather than per row. The bus keeps the order.
            acks: list[tuple[int, asyncio.Future[Envelope]]] = []
            for row_id, topic, document in rows:
                try:
                    acks.append(
                        (row_id, await self._bus.send_envelope(topic, Envelope.from_dict(document)))
                    )
                except (EnvelopeError, MessageTooLargeError) as exc:
                    # A row that can never be published would block every row behind it.
                    log.error("outbox_row_dropped", outbox_id=row_id, topic=topic, reason=str(exc))
                    dropped.append(row_id)
                except Exception as exc:
                    error = exc
                    break
            for row_id, ack in acks:
                try:
                    await ack
                except Exception as exc:
                    error = error or exc
                else:
                    done.append(row_id)
            if done or dropped:
                # Published rows go even when another failed: fewer duplicates.
                await session.execute(self._delete, {"ids": done + dropped})
        published = len(done)
        if self._metrics is not None:
            if published:
                self._metrics.outbox_published.inc(published)
            if dropped:
                self._metrics.outbox_dropped.inc(len(dropped))
        if error is not None:
            raise error
        return published, len(rows)

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._sweep_interval)
            self._wake.clear()
            try:
                await self.drain()
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._metrics is not None:
                    self._metrics.outbox_failures.inc()
                log.warning("outbox_publish_failed", schema=self._database.schema, exc_info=True)
                if self._stopping:
                    return
                # Back off, but a stop still ends the wait at once.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=backoff)
                backoff = min(backoff * 2, self._sweep_interval)
                # Keep the retry going even if nobody commits meanwhile.
                self._wake.set()
                continue
            if self._stopping:
                return
