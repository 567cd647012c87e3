"""SQL of the A2A task store: tasks (versioned), their event log, and turns.

A repository is built from a session whose transaction is scoped to one
tenant (row-level security); every query filters by that tenant too. The two
writes of every A2A message (its turn, its task) are :class:`ScopedWrites`
instead: one scoped SQL function call each, in its own transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Database, Keyset, on_driver

__all__ = [
    "TASK_EVENTS_CHANNEL",
    "TERMINAL_STATES",
    "ScopedWrites",
    "TaskFilter",
    "TaskRepository",
    "TaskRow",
    "TaskWrite",
    "TurnRepository",
    "TurnRow",
    "Written",
]

TASK_EVENTS_CHANNEL = "gateway_a2a_task_events"
"""The ``NOTIFY`` channel that wakes the tails of a task's event log (payload ``tenant task``;
``gateway.a2a_write_task`` names it too)."""

TERMINAL_STATES = (
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
)

TaskWrite = Literal["insert", "update", "cancel"]
"""How :meth:`ScopedWrites.write_task` writes a task."""

_TASK_COLUMNS = "task_id, context_id, user_id, agent, status, task, version, status_timestamp"

# The owner and agent filters are optional: NULL lets every row of the tenant through.
_SCOPE = (
    "tenant_id = :tenant_id AND task_id = :task_id "
    "AND (CAST(:agent AS text) IS NULL OR agent = :agent) "
    "AND (CAST(:owner AS text) IS NULL OR user_id = :owner)"
)
_GET = text(f"SELECT {_TASK_COLUMNS} FROM gateway.a2a_tasks WHERE {_SCOPE}")  # noqa: S608
# The two writes of every A2A message, one statement each (migration gateway_0005), in
# the driver's own placeholders: they go to asyncpg directly (see ScopedWrites).
_WRITE_TASK = (
    "SELECT version, pushes, queued FROM gateway.a2a_write_task($1, $2, $3, $4, $5, $6, $7, $8, "
    "$9, $10::jsonb, $11, $12, $13::jsonb, $14::jsonb, $15, $16)"
)
_ADD_TURN = "SELECT gateway.a2a_add_turn($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb)"
_TERMINAL = list(TERMINAL_STATES)
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
    "question, answer_message_id, reply"
)
_TURN = text(
    f"SELECT {_TURN_COLUMNS} FROM gateway.a2a_turns "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND turn = :turn"
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
    "UPDATE gateway.a2a_turns SET question = CAST(:question AS jsonb), "
    "answer_message_id = NULL, updated_at = now() "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND turn = :turn"
)
# The caller's message that answers the question a turn waits on takes the question.
_CLAIM_ANSWER = text(
    "UPDATE gateway.a2a_turns SET question = NULL, answer_message_id = :message_id, "
    "updated_at = now() "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND turn = :turn "
    "AND question IS NOT NULL RETURNING turn"
)
_SET_REPLY = text(
    "UPDATE gateway.a2a_turns SET reply = CAST(:reply AS jsonb), updated_at = now() "
    "WHERE tenant_id = :tenant_id AND task_id = :task_id AND turn = :turn"
)
_DELETE_TURN = text(
    "DELETE FROM gateway.a2a_turns "
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
    """What a write of a task left: its new version, whether it has push configurations,
    and the push notifications it queued (``queued``: each row's ``seq``, ``config_id``,
    ``attempts`` (1: held for its first try) and ``config``, oldest first)."""

    version: int
    pushes: bool
    queued: tuple[dict[str, Any], ...] = ()


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

    ``question`` is the question to a human the task waits on, when it does;
    ``answer_message_id`` the id of the caller's message that answered the last
    one; ``reply`` the direct message the agent answered the turn with (no task
    holds it), as A2A JSON.
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
    answer_message_id: str | None = None
    reply: dict[str, Any] | None = None

    @property
    def message_id(self) -> str | None:
        """The ``messageId`` of the caller's message that started the turn."""
        value = self.message.get("messageId")
        return value if isinstance(value, str) else None

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
            answer_message_id=row["answer_message_id"],
            reply=dict(row["reply"]) if row["reply"] is not None else None,
        )


class TurnRepository:
    """Reads and writes one tenant's turns."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def get(self, task_id: str, turn: int) -> TurnRow | None:
        """Turn ``turn`` of the task."""
        params = {"tenant_id": self._tenant_id, "task_id": task_id, "turn": turn}
        row = (await self._session.execute(_TURN, params)).mappings().first()
        return TurnRow.of(row) if row is not None else None

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
        """Record (or clear) the question to a human a turn waits on (a new question has no
        answer yet)."""
        await self._session.execute(
            _SET_QUESTION,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "turn": turn,
                "question": json.dumps(question) if question is not None else None,
            },
        )

    async def claim_answer(self, task_id: str, turn: int, message_id: str) -> bool:
        """Take the question turn ``turn`` waits on for the caller's message ``message_id``
        (its answer); False when the turn waits on none (any more)."""
        params = {
            "tenant_id": self._tenant_id,
            "task_id": task_id,
            "turn": turn,
            "message_id": message_id,
        }
        return (await self._session.execute(_CLAIM_ANSWER, params)).first() is not None

    async def set_reply(self, task_id: str, turn: int, reply: dict[str, Any]) -> None:
        """Record the direct message the agent answered turn ``turn`` with."""
        params = {
            "tenant_id": self._tenant_id,
            "task_id": task_id,
            "turn": turn,
            "reply": json.dumps(reply),
        }
        await self._session.execute(_SET_REPLY, params)

    async def delete(self, task_id: str, turn: int) -> None:
        """Forget turn ``turn`` (its request never went out)."""
        params = {"tenant_id": self._tenant_id, "task_id": task_id, "turn": turn}
        await self._session.execute(_DELETE_TURN, params)


class ScopedWrites:
    """The two writes of every A2A message, each one statement in its own transaction.

    A unit of work costs BEGIN, the tenant scope, the statements and COMMIT, each a
    round trip; these writes sit on the path a caller waits on, so each is one
    function call instead (migration ``gateway_0005``) that sets the same scope
    (tenant and user, under row-level security) and commits on its own.

    They run on a connection of the service's pool, but on the driver (asyncpg)
    directly (:func:`disco_service.on_driver`): SQLAlchemy's wrappers cost more CPU
    than the statement itself, on every A2A message.
    """

    def __init__(self, database: Database) -> None:
        self._database = database

    async def _one(self, statement: str, *args: Any) -> asyncpg.Record | None:
        return await on_driver(
            self._database.engine, statement, lambda driver: driver.fetchrow(statement, *args)
        )

    async def add_turn(self, tenant_id: str, turn: TurnRow) -> bool:
        """Record a turn; False when the turn is recorded already (a second record of it,
        or another message's record of the same turn, is ignored)."""
        row = await self._one(
            _ADD_TURN,
            tenant_id,
            turn.user_id,
            turn.task_id,
            turn.turn,
            turn.correlation_id,
            turn.context_id,
            turn.agent,
            turn.skill,
            turn.event_type,
            json.dumps(turn.message),
        )
        return row is not None and bool(row[0])

    async def write_task(
        self,
        write: TaskWrite,
        *,
        tenant_id: str,
        user_id: str | None,
        task_id: str,
        status: str,
        status_timestamp: datetime,
        task: dict[str, Any],
        event: dict[str, Any] | None,
        context_id: str | None = None,
        owner: str | None = None,
        agent: str | None = None,
        prev: int | None = None,
        push: dict[str, Any] | None = None,
        push_token: str | None = None,
        push_lease_seconds: float = 0.0,
    ) -> Written | None:
        """Write a task; its new version, or None when nothing was written.

        ``insert``: a new task at version 1 (None: the id is taken). ``update``:
        replace version ``prev`` (None: ``prev`` is stale). ``cancel``: overwrite
        any version of a task that is not over (None: over, or absent). When it
        wrote, ``event`` (what produced the task) is logged at the new version and
        the log's tails wake on commit; and ``push`` (a notification's body: a
        ``StreamResponse``), when given, is queued for each push configuration of the task,
        held under ``push_token`` for ``push_lease_seconds`` (migration
        ``gateway_0009``).
        """
        task_text = json.dumps(task)

        def text_of(body: dict[str, Any]) -> str:
            # A task as its own event (or notification): its JSON is made once.
            only_task = len(body) == 1 and body.get("task") is task
            return f'{{"task": {task_text}}}' if only_task else json.dumps(body)

        event_text = text_of(event) if event is not None else None
        push_text: str | None = None
        if push is not None:
            push_text = event_text if push is event else text_of(push)
        row = await self._one(
            _WRITE_TASK,
            tenant_id,
            user_id,
            write,
            task_id,
            context_id,
            owner,
            agent,
            status,
            status_timestamp,
            task_text,
            prev,
            _TERMINAL,
            event_text,
            push_text,
            push_token,
            push_lease_seconds,
        )
        if row is None or row["version"] is None:
            return None
        queued_rows = row["queued"]  # decoded by the pool's jsonb codec
        if isinstance(queued_rows, str):
            queued_rows = json.loads(queued_rows)
        queued = tuple(queued_rows or ())
        return Written(int(row["version"]), bool(row["pushes"]), queued)
