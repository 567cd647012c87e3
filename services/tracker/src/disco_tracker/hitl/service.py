"""HITL timeouts: record questions and answers, publish timeouts past the deadline."""

from __future__ import annotations

from datetime import timedelta

import structlog
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from disco.bus import NonRetryableError
from disco_common.envelope import Envelope
from disco_common.ids import UtcDatetime, utcnow
from disco_common.notifications import HumanInputRequest, HumanInputResponse, NotificationType
from disco_common.pagination import Page
from disco_common.topics import Topic
from disco_common.tracker import HumanInputWaitQuery, HumanInputWaitRecord
from disco_service import Database, Paginator, publish_after_commit
from disco_tracker.hitl.events import task_timeout, timeout_answer
from disco_tracker.hitl.repository import HitlRepository
from disco_tracker.ingest.facts import timeline_row
from disco_tracker.ingest.repository import IngestRepository

__all__ = ["DEFAULT_TENANT", "get_waits", "handle_notification", "list_waits", "sweep_timeouts"]

log = structlog.get_logger("disco_tracker.hitl")

DEFAULT_TENANT = "default"
"""Tenant of envelopes that carry none (a plain Kafka client may omit it)."""

# An asker's clock may run ahead of ours; never let that stretch the deadline.
_MAX_CLOCK_SKEW = timedelta(seconds=5)

# Sort key: (created_at, correlation_id, response_event), oldest first.
_WAIT_PAGES = Paginator("hitl_waits", tuple[UtcDatetime, str, str])


async def handle_notification(database: Database, envelope: Envelope) -> None:
    """Record a question with a timeout, or an answer to one; ignore the rest."""
    if envelope.type == NotificationType.HUMAN_INPUT:
        await _record_question(database, envelope)
    elif envelope.correlation_id is not None:
        await _record_answer(database, envelope)


async def _record_question(database: Database, envelope: Envelope) -> None:
    try:
        request = HumanInputRequest.model_validate(envelope.data)
    except ValidationError as exc:
        # Redelivery cannot fix a malformed question: dead-letter it with the reason.
        raise NonRetryableError(
            f"notification.human_input data is not a HumanInputRequest: {exc}"
        ) from exc
    if envelope.correlation_id is None:
        if request.timeout_seconds is None:
            return  # nothing could ever match an answer to it; nothing to time out either
        raise NonRetryableError(
            "notification.human_input with timeout_seconds has no correlation_id: the answer "
            "could never be matched to it"
        )
    now = utcnow()
    asked_at = min(envelope.time, now + _MAX_CLOCK_SKEW)
    # A question without timeout_seconds (a plan-level pause) is listed as waiting
    # but has no deadline, so the sweeper never times it out.
    deadline = (
        asked_at + timedelta(seconds=request.timeout_seconds)
        if request.timeout_seconds is not None
        else None
    )
    tenant = envelope.tenant_id or DEFAULT_TENANT
    async with database.unit_of_work(tenant, envelope.user_id) as session:
        await _add_to_timeline(
            session, tenant, envelope, f"question to a human: {request.question}"
        )
        await HitlRepository(session).record_question(
            tenant_id=tenant,
            correlation_id=envelope.correlation_id,
            response_event=request.response_event,
            request_id=envelope.id,
            user_id=envelope.user_id,
            session_id=envelope.session_id,
            plan_id=request.plan_id or envelope.plan_id,
            task_id=request.task_id or envelope.task_id,
            question=request.question,
            timeout_seconds=request.timeout_seconds,
            asked_at=asked_at,
            deadline=deadline,
        )


async def _record_answer(database: Database, envelope: Envelope) -> None:
    try:
        response = HumanInputResponse.model_validate(envelope.data)
    except ValidationError:
        return  # some other notification (UI events, tool lifecycle): not an answer
    correlation_id = envelope.correlation_id
    assert correlation_id is not None
    tenant = envelope.tenant_id or DEFAULT_TENANT
    async with database.unit_of_work(tenant, envelope.user_id) as session:
        if response.timed_out:
            # Our own timeout coming back around: a part of the plan's history only.
            await _add_to_timeline(session, tenant, envelope, "nobody answered in time")
            return
        await _add_to_timeline(session, tenant, envelope, "answer from a human")
        await HitlRepository(session).record_answer(
            tenant_id=tenant,
            correlation_id=correlation_id,
            response_event=envelope.type,
            answered_at=response.answered_at,
        )


async def _add_to_timeline(
    session: AsyncSession, tenant: str, envelope: Envelope, summary: str
) -> None:
    """Questions and answers are part of their plan's history (duplicates are skipped)."""
    row = timeline_row(Topic.NOTIFICATION_EVENTS.value, envelope, keep_data=True, summary=summary)
    await IngestRepository(session, tenant).insert_events([row])


async def sweep_timeouts(database: Database, *, batch_size: int = 100) -> int:
    """Publish the timeout of every wait past its deadline; return how many.

    Claiming a wait and writing its envelopes to the outbox is one transaction,
    so a crash leaves either both or neither.
    """
    total = 0
    while True:
        async with database.unit_of_work(None) as session:
            rows = await HitlRepository(session).claim_timeouts(utcnow(), batch_size)
            for row in rows:
                await publish_after_commit(session, Topic.NOTIFICATION_EVENTS, timeout_answer(row))
                system_event = task_timeout(row)
                if system_event is not None:
                    await publish_after_commit(session, Topic.SYSTEM_EVENTS, system_event)
        for row in rows:
            log.info(
                "hitl_timed_out",
                tenant_id=row["tenant_id"],
                correlation_id=row["correlation_id"],
                task_id=row["task_id"],
                response_event=row["response_event"],
            )
        total += len(rows)
        if len(rows) < batch_size:
            return total


async def list_waits(
    repository: HitlRepository, query: HumanInputWaitQuery
) -> Page[HumanInputWaitRecord]:
    """One page of the tenant's questions to humans, oldest first.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this list and these filters.
    """
    request = _WAIT_PAGES.open(query)
    rows = await repository.list(
        status=query.status,
        task_id=query.task_id,
        plan_id=query.plan_id,
        after=request.after,
        limit=request.fetch,
    )
    return request.page(
        rows,
        key=lambda row: (row["created_at"], row["correlation_id"], row["response_event"]),
        item=lambda row: HumanInputWaitRecord.model_validate(dict(row)),
    )


async def get_waits(repository: HitlRepository, correlation_id: str) -> list[HumanInputWaitRecord]:
    """The tenant's waits with ``correlation_id`` (empty when there is none)."""
    return [
        HumanInputWaitRecord.model_validate(dict(row))
        for row in await repository.get(correlation_id)
    ]
