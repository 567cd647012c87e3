"""Erasure across services: the memory service erases and announces, the others follow.

Services never call each other, so an erasure reaches every store through
the bus. The memory service erases its own rows in the request and, in the
same transaction, puts ``erasure.requested`` in its outbox
(:func:`announce_erasure`). Every other service runs
:func:`erasure_follower` (a lifespan hook): a consumer group of its own on
``system-events`` that erases the service's rows of that tenant (or user) in
one transaction and announces ``erasure.completed`` with the counts, after
commit. Each schema's ``erase_user``/``erase_tenant`` functions
(:func:`disco_service.migration_helpers.create_erasure_functions`) find the
tenant-scoped tables in the catalog when they run, so a new table is erased
without anyone remembering to add it.

Only ``erasure.requested`` envelopes from the memory service are acted on:
the source is checked (with authenticated envelopes, the credential vouches
for the tenant). Redelivery is harmless: a second erasure deletes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from disco.bus import BusConsumer, NonRetryableError
from disco_common.envelope import Envelope
from disco_common.memory import ErasureScope
from disco_common.system_events import (
    ErasureCompletedData,
    ErasureRequestedData,
    SystemEventType,
)
from disco_common.topics import Topic
from disco_service._db import _SCHEMA_NAME
from disco_service._faults import retry_while_unavailable
from disco_service._outbox import publish_after_commit
from disco_service._state import ServiceState

__all__ = [
    "ERASURE_SOURCE",
    "ErasureRepository",
    "announce_erasure",
    "erasure_follower",
]

log = structlog.get_logger("disco_service.erasure")

ERASURE_SOURCE = "disco://service/memory"
"""The only source whose ``erasure.requested`` the followers act on."""

_FETCH_WAIT_FLOOR_MS = 500


class ErasureRepository:
    """Runs a schema's erasure functions in the session's transaction (its tenant)."""

    def __init__(self, session: AsyncSession, schema: str) -> None:
        self.session = session
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema {schema!r} must be a lower-case SQL identifier")
        functions = f'SELECT table_name, deleted FROM "{schema}"'  # noqa: S608 - checked above
        self._erase_user = text(f"{functions}.erase_user(:user_id)")
        self._erase_tenant = text(f"{functions}.erase_tenant()")

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every row of ``user_id`` in the transaction's tenant; rows per table."""
        rows = await self.session.execute(self._erase_user, {"user_id": user_id})
        return {row.table_name: int(row.deleted) for row in rows}

    async def erase_tenant(self) -> dict[str, int]:
        """Delete every row of the transaction's tenant; rows per table."""
        rows = await self.session.execute(self._erase_tenant)
        return {row.table_name: int(row.deleted) for row in rows}


async def announce_erasure(
    session: AsyncSession, *, scope: ErasureScope, user_id: str | None, requested_by: str
) -> Envelope:
    """Put ``erasure.requested`` in the outbox of ``session``'s transaction (its tenant)."""
    data = ErasureRequestedData(scope=scope, user_id=user_id, requested_by=requested_by)
    envelope = Envelope(
        source=ERASURE_SOURCE,
        type=SystemEventType.ERASURE_REQUESTED.value,
        data=data.model_dump(mode="json", exclude_none=True),
        user_id=requested_by,
    )
    return await publish_after_commit(session, Topic.SYSTEM_EVENTS, envelope)


async def _follow(state: ServiceState[Any], envelope: Envelope) -> None:
    if envelope.source != ERASURE_SOURCE:
        raise NonRetryableError(
            f"erasure.requested from {envelope.source!r} refused: only {ERASURE_SOURCE} "
            "announces erasures"
        )
    tenant = envelope.tenant_id
    if not tenant:
        raise NonRetryableError("erasure.requested without a tenant_id")
    request = ErasureRequestedData.model_validate(envelope.data)
    if request.scope is ErasureScope.USER and not request.user_id:
        raise NonRetryableError("a user erasure without user_id")
    service = state.settings.service_name
    database = state.require_database()
    async with database.unit_of_work(tenant) as session:
        repository = ErasureRepository(session, state.schema)
        if request.scope is ErasureScope.USER:
            assert request.user_id is not None
            deleted = await repository.erase_user(request.user_id)
        else:
            deleted = await repository.erase_tenant()
        done = ErasureCompletedData(
            service=service,
            scope=request.scope,
            user_id=request.user_id,
            request_id=envelope.id,
            deleted=deleted,
        )
        await publish_after_commit(
            session,
            Topic.SYSTEM_EVENTS,
            Envelope(
                source=f"disco://service/{service}",
                type=SystemEventType.ERASURE_COMPLETED.value,
                data=done.model_dump(mode="json", exclude_none=True),
                correlation_id=envelope.id,
                causation_id=envelope.id,
            ),
        )
    log.info(
        "erasure_followed",
        tenant_id=tenant,
        scope=request.scope.value,
        erased_user=request.user_id,
        rows=sum(deleted.values()),
    )


@asynccontextmanager
async def erasure_follower(state: ServiceState[Any]) -> AsyncIterator[None]:
    """Lifespan hook: erase this service's rows whenever the memory service erased a
    user or a tenant (a consumer group ``<service>-erasure`` on ``system-events``)."""
    # An erasure may take a moment: no need for the 1 ms fetches of a consumer that
    # must answer at once, which on the embedded broker a busy system-events makes
    # by the hundred each second.
    consumer = BusConsumer(
        state.require_bus(),
        f"{state.settings.service_name}-erasure",
        fetch_wait_floor_ms=_FETCH_WAIT_FLOOR_MS,
    )

    @consumer.on(Topic.SYSTEM_EVENTS, SystemEventType.ERASURE_REQUESTED.value)
    @retry_while_unavailable
    async def on_erasure(envelope: Envelope) -> None:
        await _follow(state, envelope)

    state.start_alongside(consumer.start(), name=consumer.group)
    try:
        yield
    finally:
        await consumer.stop(grace=state.settings.shutdown_grace_seconds)
