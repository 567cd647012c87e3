"""SQL of the HITL waits (``tracker.hitl_waits``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.tracker import HumanInputWaitStatus
from disco_service import Keyset

__all__ = ["HitlRepository", "QuestionRow"]

QuestionRow = dict[str, Any]

_RECORD_QUESTION = text(
    """
    INSERT INTO tracker.hitl_waits (
        tenant_id, correlation_id, response_event, status, request_id, user_id, session_id,
        plan_id, task_id, question, timeout_seconds, asked_at, deadline)
    VALUES (
        :tenant_id, :correlation_id, :response_event, 'waiting', :request_id, :user_id,
        :session_id, :plan_id, :task_id, :question, :timeout_seconds, :asked_at, :deadline)
    ON CONFLICT (tenant_id, correlation_id, response_event) DO UPDATE SET
        request_id = EXCLUDED.request_id, user_id = EXCLUDED.user_id,
        session_id = EXCLUDED.session_id, plan_id = EXCLUDED.plan_id,
        task_id = EXCLUDED.task_id, question = EXCLUDED.question,
        timeout_seconds = EXCLUDED.timeout_seconds, asked_at = EXCLUDED.asked_at,
        deadline = EXCLUDED.deadline
    -- Only an answer seen first left the question's columns empty; a redelivered
    -- question changes nothing.
    WHERE tracker.hitl_waits.request_id IS NULL
    """
)

_RECORD_ANSWER = text(
    """
    INSERT INTO tracker.hitl_waits (tenant_id, correlation_id, response_event, status, answered_at)
    VALUES (:tenant_id, :correlation_id, :response_event, 'answered', :answered_at)
    ON CONFLICT (tenant_id, correlation_id, response_event) DO UPDATE SET
        status = CASE tracker.hitl_waits.status
                    WHEN 'waiting' THEN 'answered'
                    WHEN 'timed_out' THEN 'answered_late'
                    ELSE tracker.hitl_waits.status END,
        answered_at = COALESCE(tracker.hitl_waits.answered_at, EXCLUDED.answered_at)
    """
)

_CLAIM_TIMEOUTS = text("SELECT * FROM tracker.claim_hitl_timeouts(:cutoff, :max_rows)")

_LIST_ORDER = Keyset("created_at", "correlation_id", "response_event")
_COLUMNS = (
    "correlation_id, response_event, status, request_id, user_id, session_id, plan_id, "
    "task_id, question, timeout_seconds, asked_at, deadline, answered_at, timed_out_at, "
    "created_at"
)


class HitlRepository:
    """Reads and writes HITL waits within one tenant-scoped session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record_question(self, **values: Any) -> None:
        """Start watching a question (idempotent for a redelivered question)."""
        await self.session.execute(_RECORD_QUESTION, values)

    async def record_answer(
        self, *, tenant_id: str, correlation_id: str, response_event: str, answered_at: datetime
    ) -> None:
        """Mark a question answered (late when its timeout was already published)."""
        await self.session.execute(
            _RECORD_ANSWER,
            {
                "tenant_id": tenant_id,
                "correlation_id": correlation_id,
                "response_event": response_event,
                "answered_at": answered_at,
            },
        )

    async def claim_timeouts(self, cutoff: datetime, max_rows: int) -> Sequence[RowMapping]:
        """Mark up to ``max_rows`` waits past ``cutoff`` as timed out and return them.

        Runs the SECURITY DEFINER function: it sees every tenant's waits, and
        several tracker instances never claim the same row.
        """
        result = await self.session.execute(
            _CLAIM_TIMEOUTS, {"cutoff": cutoff, "max_rows": max_rows}
        )
        return result.mappings().all()

    async def get(self, correlation_id: str) -> Sequence[RowMapping]:
        """The waits with ``correlation_id`` (one per response event) of the session's tenant."""
        result = await self.session.execute(
            text(
                f"SELECT {_COLUMNS} FROM tracker.hitl_waits "  # noqa: S608 - constant columns
                "WHERE correlation_id = :correlation_id ORDER BY response_event"
            ),
            {"correlation_id": correlation_id},
        )
        return result.mappings().all()

    async def list(
        self,
        *,
        status: HumanInputWaitStatus | None,
        task_id: str | None,
        plan_id: str | None,
        after: tuple[datetime, str, str] | None,
        limit: int,
    ) -> Sequence[RowMapping]:
        """The session tenant's waits, oldest first, after the cursor position."""
        seek, params = _LIST_ORDER.after(after)
        clauses = [seek]
        params["limit"] = limit
        if status is not None:
            clauses.append("status = :status")
            params["status"] = status.value
        if task_id is not None:
            clauses.append("task_id = :task_id")
            params["task_id"] = task_id
        if plan_id is not None:
            clauses.append("plan_id = :plan_id")
            params["plan_id"] = plan_id
        result = await self.session.execute(
            text(
                f"SELECT {_COLUMNS} FROM tracker.hitl_waits WHERE {' AND '.join(clauses)} "  # noqa: S608
                f"{_LIST_ORDER.order_by} LIMIT :limit"
            ),
            params,
        )
        return result.mappings().all()
