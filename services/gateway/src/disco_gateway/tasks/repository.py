"""SQL of the A2A task store: tasks (versioned), their event log, and turns.

A repository is built from a session whose transaction is scoped to one
tenant (row-level security); every query filters by that tenant too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = [
    "TASK_EVENTS_CHANNEL",
    "TaskFilter",
    "TaskRepository",
    "TaskRow",
    "TurnRepository",
    "TurnRow",
    "Written",
]

TASK_EVENTS_CHANNEL = "gateway_a2a_task_events"
"""The ``NOTIFY`` channel that wakes the tails of a task's event log (payload ``tenant task``)."""

TERMINAL_STATES = (
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
)

_TASK_COLUMNS = "task_id, context_id, user_id, agent, status, task, version, status_timestamp"

# Every write says whether the task has push configurations, so that delivering
# its events needs no query of its own when it has none (the usual case).
_RETURNING = (
    "RETURNING version, EXISTS (SELECT 1 FROM gateway.a2a_push_configs p "
    "WHERE p.tenant_id = :tenant_id AND p.task_id = :task_id) AS pushes"
)

# The owner and agent filters are optional: NULL lets every row of the tenant through.
_SCOPE = (
    "tenant_id = :tenant_id AND task_id = :task_id "
    "AND (CAST(:agent AS text) IS NULL OR agent = :agent) "
    "AND (CAST(:owner AS text) IS NULL OR user_id = :owner)"
)
_GET = text(f"SELECT {_TASK_COLUMNS} FROM gateway.a2a_tasks WHERE {_SCOPE}")  # noqa: S608
_INSERT = (
    "INSERT INTO gateway.a2a_tasks (tenant_id, task_id, context_id, user_id, agent, status, "  # noqa: S608
    "task, version, status_timestamp) VALUES (:tenant_id, :task_id, :context_id, :owner, "
    ":agent, :status, CAST(:task AS jsonb), 1, :status_timestamp) "
    f"ON CONFLICT DO NOTHING {_RETURNING}"
)
_UPDATE = (
    "UPDATE gateway.a2a_tasks SET task = CAST(:task AS jsonb), status = :status, "  # noqa: S608
    "status_timestamp = :status_timestamp, version = version + 1, updated_at = now() "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND version = :prev "
    f"{_RETURNING}"
)
# Cancel overwrites whatever non-terminal version is stored (the a2a-sdk contract).
_CANCEL = (
    "UPDATE gateway.a2a_tasks SET task = CAST(:task AS jsonb), status = :status, "  # noqa: S608
    "status_timestamp = :status_timestamp, version = version + 1, updated_at = now() "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND status <> ALL(:terminal) "
    f"{_RETURNING}"
)


def _logged(write: str) -> str:
    """``write`` (a task write ``RETURNING version, pushes``), logging ``:event`` at the
    version it produced and notifying the log's tails, in one statement (one round trip).

    Nothing is logged or notified when the write changed no row. ``NOTIFY`` is
    transactional: the tails wake when the transaction commits, not before.
    """
    return (
        f"WITH written AS ({write}), logged AS ("  # noqa: S608
        "INSERT INTO gateway.a2a_task_events (tenant_id, task_id, version, event) "
        "SELECT :tenant_id, :task_id, version, CAST(:event AS jsonb) FROM written "
        "ON CONFLICT DO NOTHING) "
        "SELECT version, pushes, pg_notify(:channel, :payload) AS notified FROM written"
    )


_WRITES = {
    (name, event): text(_logged(sql) if event else sql)
    for name, sql in (("insert", _INSERT), ("update", _UPDATE), ("cancel", _CANCEL))
    for event in (False, True)
}
_DELETE = text(f"DELETE FROM gateway.a2a_tasks WHERE {_SCOPE}")  # noqa: S608
_EVENTS_AFTER = text(
    "SELECT version, event FROM gateway.a2a_task_events "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND version > :after "
    "ORDER BY version LIMIT :limit"
)
_LIST_ORDER = Keyset("status_timestamp", "task_id", descending=True)
_FILTERS = (
    "tenant_id = :tenant_id "
    "AND (CAST(:agent AS text) IS NULL OR agent = :agent) "
    "AND (CAST(:owner AS text) IS NULL OR user_id = :owner) "
    "AND (CAST(:context_id AS text) IS NULL OR context_id = :context_id) "
    "AND (CAST(:status AS text) IS NULL OR status = :status) "
    "AND (CAST(:status_after AS timestamptz) IS NULL OR status_timestamp > :status_after)"
)
_LIST = f"SELECT {_TASK_COLUMNS} FROM gateway.a2a_tasks WHERE {_FILTERS}"  # noqa: S608
_COUNT = text(f"SELECT count(*) FROM gateway.a2a_tasks WHERE {_FILTERS}")  # noqa: S608

_TURN_COLUMNS = (
    "task_id, turn, correlation_id, context_id, user_id, agent, skill, event_type, message, "
    "question"
)
_ADD_TURN = text(
    "INSERT INTO gateway.a2a_turns (tenant_id, task_id, turn, correlation_id, context_id, "
    "user_id, agent, skill, event_type, message) VALUES (:tenant_id, :task_id, :turn, "
    ":correlation_id, :context_id, :user_id, :agent, :skill, :event_type, "
    "CAST(:message AS jsonb)) ON CONFLICT DO NOTHING"
)
_LATEST_TURN = text(
    f"SELECT {_TURN_COLUMNS} FROM gateway.a2a_turns "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND task_id = :task_id ORDER BY turn DESC LIMIT 1"
)
_TURN_BY_CORRELATION = text(
    f"SELECT {_TURN_COLUMNS} FROM gateway.a2a_turns "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND correlation_id = :correlation_id"
)
_TURN_AND_STATUS = text(
    f"SELECT {', '.join('t.' + c for c in _TURN_COLUMNS.split(', '))}, k.status AS task_status "  # noqa: S608
    "FROM gateway.a2a_turns t LEFT JOIN gateway.a2a_tasks k "
    "ON k.tenant_id = t.tenant_id AND k.task_id = t.task_id "
    "WHERE t.tenant_id = :tenant_id AND t.correlation_id = :correlation_id"
)
_SET_QUESTION = text(
    "UPDATE gateway.a2a_turns SET question = CAST(:question AS jsonb), updated_at = now() "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND turn = :turn"
)


@dataclass(frozen=True)
class TaskRow:
    """A stored task: its A2A JSON (camelCase) and the version it was read at."""

    task_id: str
    context_id: str
    user_id: str | None
    agent: str | None
    status: str
    task: dict[str, Any]
    version: int
    status_timestamp: datetime

    @classmethod
    def of(cls, row: RowMapping) -> TaskRow:
        return cls(
            task_id=row["task_id"],
            context_id=row["context_id"],
            user_id=row["user_id"],
            agent=row["agent"],
            status=row["status"],
            task=dict(row["task"]),
            version=int(row["version"]),
            status_timestamp=row["status_timestamp"],
        )


@dataclass(frozen=True)
class Written:
    """What a write of a task left: its new version, and whether it has push configurations."""

    version: int
    pushes: bool


@dataclass(frozen=True)
class TaskFilter:
    """Which of a tenant's tasks a list or a lookup may see."""

    agent: str | None = None
    """Only tasks for this agent (an agent's endpoint); None: every agent (the gateway's)."""
    owner: str | None = None
    """Only tasks of this user; None: every user's (the gateway's own jobs)."""


class TaskRepository:
    """Reads and writes one tenant's A2A tasks and their event log."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    def _scope(self, task_id: str, where: TaskFilter) -> dict[str, Any]:
        return {
            "tenant_id": self._tenant_id,
            "task_id": task_id,
            "agent": where.agent,
            "owner": where.owner,
        }

    async def get(self, task_id: str, where: TaskFilter) -> TaskRow | None:
        """The task, if ``where`` lets the caller see it."""
        row = (await self._session.execute(_GET, self._scope(task_id, where))).mappings().first()
        return TaskRow.of(row) if row is not None else None

    async def insert(
        self,
        task_id: str,
        *,
        context_id: str,
        owner: str | None,
        agent: str | None,
        status: str,
        status_timestamp: datetime,
        task: dict[str, Any],
        event: dict[str, Any] | None = None,
    ) -> Written | None:
        """Store a new task at version 1; None when the id is taken.

        ``event``: the event that produced the task, logged at its version (the
        log's tails wake on commit), only when the write happened.
        """
        return await self._written(
            "insert",
            task_id,
            {
                "context_id": context_id,
                "owner": owner,
                "agent": agent,
                "status": status,
                "status_timestamp": status_timestamp,
                "task": json.dumps(task),
            },
            event,
        )

    async def update(
        self,
        task_id: str,
        *,
        prev: int,
        status: str,
        status_timestamp: datetime,
        task: dict[str, Any],
        event: dict[str, Any] | None = None,
    ) -> Written | None:
        """Replace version ``prev`` of the task; its new version, or None if ``prev`` is stale
        (``event`` as for :meth:`insert`)."""
        return await self._written(
            "update",
            task_id,
            {
                "prev": prev,
                "status": status,
                "status_timestamp": status_timestamp,
                "task": json.dumps(task),
            },
            event,
        )

    async def cancel(
        self,
        task_id: str,
        *,
        status: str,
        status_timestamp: datetime,
        task: dict[str, Any],
        event: dict[str, Any] | None = None,
    ) -> Written | None:
        """Overwrite a task that is not over; its new version, or None (over, or absent)
        (``event`` as for :meth:`insert`)."""
        return await self._written(
            "cancel",
            task_id,
            {
                "status": status,
                "status_timestamp": status_timestamp,
                "task": json.dumps(task),
                "terminal": list(TERMINAL_STATES),
            },
            event,
        )

    async def _written(
        self, write: str, task_id: str, params: dict[str, Any], event: dict[str, Any] | None
    ) -> Written | None:
        params = {"tenant_id": self._tenant_id, "task_id": task_id, **params}
        if event is not None:
            params["event"] = json.dumps(event)
            params["channel"] = TASK_EVENTS_CHANNEL
            params["payload"] = f"{self._tenant_id} {task_id}"
        row = (await self._session.execute(_WRITES[write, event is not None], params)).first()
        return Written(int(row.version), bool(row.pushes)) if row is not None else None

    async def delete(self, task_id: str, where: TaskFilter) -> None:
        """Remove the task (its log goes with the retention job)."""
        await self._session.execute(_DELETE, self._scope(task_id, where))

    async def events_after(
        self, task_id: str, *, after: int, limit: int = 500
    ) -> list[tuple[int, dict[str, Any]]]:
        """The logged events of the task newer than version ``after``, oldest first."""
        rows = await self._session.execute(
            _EVENTS_AFTER,
            {"tenant_id": self._tenant_id, "task_id": task_id, "after": after, "limit": limit},
        )
        return [(int(version), dict(event)) for version, event in rows.all()]

    def _filters(
        self,
        where: TaskFilter,
        *,
        context_id: str | None,
        status: str | None,
        status_after: datetime | None,
    ) -> dict[str, Any]:
        return {
            "tenant_id": self._tenant_id,
            "agent": where.agent,
            "owner": where.owner,
            "context_id": context_id,
            "status": status,
            "status_after": status_after,
        }

    async def list(
        self,
        where: TaskFilter,
        *,
        context_id: str | None,
        status: str | None,
        status_after: datetime | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TaskRow]:
        """Tasks matching the filters, newest status first, after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        result = await self._session.execute(
            text(f"{_LIST} AND {seek} {_LIST_ORDER.order_by} LIMIT :limit"),
            {
                **params,
                **self._filters(
                    where, context_id=context_id, status=status, status_after=status_after
                ),
                "limit": limit,
            },
        )
        return [TaskRow.of(row) for row in result.mappings().all()]

    async def count(
        self,
        where: TaskFilter,
        *,
        context_id: str | None,
        status: str | None,
        status_after: datetime | None,
    ) -> int:
        """How many tasks match the filters."""
        total = await self._session.scalar(
            _COUNT,
            self._filters(where, context_id=context_id, status=status, status_after=status_after),
        )
        return int(total or 0)


@dataclass(frozen=True)
class TurnRow:
    """One request the gateway made of an agent for a task (a task has one per turn).

    ``question`` is the question to a human the task waits on, when it does.
    """

    task_id: str
    turn: int
    correlation_id: str
    context_id: str
    user_id: str
    agent: str
    skill: str
    event_type: str
    message: dict[str, Any]
    question: dict[str, Any] | None

    @classmethod
    def of(cls, row: RowMapping) -> TurnRow:
        return cls(
            task_id=row["task_id"],
            turn=int(row["turn"]),
            correlation_id=row["correlation_id"],
            context_id=row["context_id"],
            user_id=row["user_id"],
            agent=row["agent"],
            skill=row["skill"],
            event_type=row["event_type"],
            message=dict(row["message"]),
            question=dict(row["question"]) if row["question"] is not None else None,
        )


class TurnRepository:
    """Reads and writes one tenant's turns."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def add(self, turn: TurnRow) -> None:
        """Record a turn (a second record of the same turn is ignored)."""
        await self._session.execute(
            _ADD_TURN,
            {
                "tenant_id": self._tenant_id,
                "task_id": turn.task_id,
                "turn": turn.turn,
                "correlation_id": turn.correlation_id,
                "context_id": turn.context_id,
                "user_id": turn.user_id,
                "agent": turn.agent,
                "skill": turn.skill,
                "event_type": turn.event_type,
                "message": json.dumps(turn.message),
            },
        )

    async def latest(self, task_id: str) -> TurnRow | None:
        """The task's current turn."""
        row = (
            (
                await self._session.execute(
                    _LATEST_TURN, {"tenant_id": self._tenant_id, "task_id": task_id}
                )
            )
            .mappings()
            .first()
        )
        return TurnRow.of(row) if row is not None else None

    async def by_correlation(self, correlation_id: str) -> TurnRow | None:
        """The turn whose request carried ``correlation_id``."""
        row = (
            (
                await self._session.execute(
                    _TURN_BY_CORRELATION,
                    {"tenant_id": self._tenant_id, "correlation_id": correlation_id},
                )
            )
            .mappings()
            .first()
        )
        return TurnRow.of(row) if row is not None else None

    async def by_correlation_with_status(
        self, correlation_id: str
    ) -> tuple[TurnRow, str | None] | None:
        """The turn whose request carried ``correlation_id``, and its task's status (if stored)."""
        row = (
            (
                await self._session.execute(
                    _TURN_AND_STATUS,
                    {"tenant_id": self._tenant_id, "correlation_id": correlation_id},
                )
            )
            .mappings()
            .first()
        )
        return (TurnRow.of(row), row["task_status"]) if row is not None else None

    async def set_question(self, task_id: str, turn: int, question: dict[str, Any] | None) -> None:
        """Record (or clear) the question to a human a turn waits on."""
        await self._session.execute(
            _SET_QUESTION,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "turn": turn,
                "question": json.dumps(question) if question is not None else None,
            },
        )
