"""SQL of push notification configurations (``gateway.a2a_push_configs``) and of the
notifications waiting to be delivered (``gateway.a2a_push_deliveries``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = [
    "ClaimedDelivery",
    "PushConfigRepository",
    "PushDeliveryRepository",
    "WaitingDelivery",
    "claim_due_deliveries",
    "release_deliveries",
    "waiting_deliveries",
]

_UPSERT = text(
    "INSERT INTO gateway.a2a_push_configs (tenant_id, task_id, config_id, user_id, config) "
    "VALUES (:tenant_id, :task_id, :config_id, :user_id, CAST(:config AS jsonb)) "
    "ON CONFLICT (tenant_id, task_id, config_id) DO UPDATE SET config = excluded.config, "
    "user_id = excluded.user_id"
)
_LIST = text(
    "SELECT config FROM gateway.a2a_push_configs WHERE tenant_id = :tenant_id "
    "AND task_id = :task_id AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id) "
    "ORDER BY created_at, config_id"
)
_DELETE = text(
    "DELETE FROM gateway.a2a_push_configs WHERE tenant_id = :tenant_id AND task_id = :task_id "
    "AND (CAST(:config_id AS text) IS NULL OR config_id = :config_id) "
    "AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id)"
)


class PushConfigRepository:
    """Reads and writes one tenant's push notification configurations."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def put(
        self, task_id: str, config_id: str, *, user_id: str, config: dict[str, Any]
    ) -> None:
        """Create or replace configuration ``config_id`` of the task."""
        await self._session.execute(
            _UPSERT,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "config_id": config_id,
                "user_id": user_id,
                "config": json.dumps(config),
            },
        )

    async def list(self, task_id: str, *, user_id: str | None) -> list[dict[str, Any]]:
        """The task's configurations (of ``user_id``; every user's with None)."""
        rows = await self._session.execute(
            _LIST, {"tenant_id": self._tenant_id, "task_id": task_id, "user_id": user_id}
        )
        return [dict(config) for (config,) in rows.all()]

    async def delete(self, task_id: str, config_id: str | None, *, user_id: str | None) -> None:
        """Remove configuration ``config_id`` of the task (all of them with None)."""
        await self._session.execute(
            _DELETE,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "config_id": config_id,
                "user_id": user_id,
            },
        )


# -- deliveries (gateway.a2a_push_deliveries) ----------------------------------------------

_ENQUEUE = text(
    "WITH configs AS ("
    " SELECT config_id, user_id, config FROM gateway.a2a_push_configs"
    " WHERE tenant_id = :tenant_id AND task_id = :task_id),"
    " queued AS ("
    " INSERT INTO gateway.a2a_push_deliveries"
    " (tenant_id, task_id, config_id, user_id, body, claimed_by, due_at, attempts)"
    " SELECT :tenant_id, :task_id, c.config_id, c.user_id, CAST(:body AS jsonb), :me,"
    " now() + make_interval(secs => :lease),"
    # The first of its configuration is held for its first try at once (no claim).
    " CASE WHEN EXISTS (SELECT 1 FROM gateway.a2a_push_deliveries AS e"
    " WHERE e.tenant_id = :tenant_id AND e.task_id = :task_id"
    " AND e.config_id = c.config_id) THEN 0 ELSE 1 END"
    " FROM configs AS c ORDER BY c.config_id"
    " RETURNING seq, config_id, attempts)"
    " SELECT queued.seq, queued.config_id, queued.attempts, configs.config"
    " FROM queued JOIN configs USING (config_id) ORDER BY queued.seq"
)
_CLAIM = text(
    "UPDATE gateway.a2a_push_deliveries AS d"
    " SET claimed_by = :me, due_at = now() + make_interval(secs => :lease),"
    " attempts = d.attempts + 1"
    " FROM gateway.a2a_push_configs AS c"
    " WHERE d.tenant_id = :tenant_id AND d.seq = :seq"
    " AND (d.claimed_by = :me OR d.due_at <= now())"
    " AND NOT EXISTS (SELECT 1 FROM gateway.a2a_push_deliveries AS e"
    " WHERE e.tenant_id = d.tenant_id AND e.task_id = d.task_id"
    " AND e.config_id = d.config_id AND e.seq < d.seq)"
    " AND c.tenant_id = d.tenant_id AND c.task_id = d.task_id AND c.config_id = d.config_id"
    " RETURNING d.task_id, d.attempts, d.body, c.config"
)
_RETRY = text(
    "UPDATE gateway.a2a_push_deliveries"
    " SET claimed_by = NULL, due_at = now() + make_interval(secs => :delay)"
    " WHERE tenant_id = :tenant_id AND seq = :seq AND claimed_by = :me"
)
_RELEASE = text(
    "UPDATE gateway.a2a_push_deliveries SET claimed_by = NULL, due_at = now()"
    " WHERE tenant_id = :tenant_id AND seq = :seq AND claimed_by = :me"
)
_DONE = text(
    "DELETE FROM gateway.a2a_push_deliveries"
    " WHERE tenant_id = :tenant_id AND seq = :seq AND claimed_by = :me"
)
_DROP = text(
    "DELETE FROM gateway.a2a_push_deliveries"
    " WHERE tenant_id = :tenant_id AND seq = ANY(:seqs) AND claimed_by = :me"
)
_WAITING = text(
    "SELECT d.task_id, d.config_id, c.config ->> 'url' AS url, d.attempts,"
    " d.claimed_by IS NOT NULL AND d.due_at > now() AS trying, d.due_at, d.created_at,"
    " coalesce(d.body #>> '{statusUpdate,status,state}', d.body #>> '{task,status,state}',"
    " CASE WHEN d.body ? 'artifactUpdate' THEN 'artifact' ELSE 'message' END) AS what"
    " FROM gateway.a2a_push_deliveries AS d JOIN gateway.a2a_push_configs AS c"
    " ON c.tenant_id = d.tenant_id AND c.task_id = d.task_id AND c.config_id = d.config_id"
    " WHERE d.tenant_id = :tenant_id ORDER BY d.created_at, d.seq LIMIT :limit"
)
_CLAIM_DUE = text(
    "SELECT tenant_id, seq, task_id, attempts, body, config"
    " FROM gateway.claim_a2a_push_deliveries(:me, :lease, :max_rows)"
)
_RELEASE_ALL = text("SELECT gateway.release_a2a_push_deliveries(:instance)")


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A notification this instance may now try once (until its lease ends)."""

    tenant_id: str
    seq: int
    task_id: str
    attempts: int
    """Tries started, this one included."""
    body: dict[str, Any]
    config: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WaitingDelivery:
    """A notification not delivered yet, as an operator looks at it."""

    task_id: str
    config_id: str
    url: str
    attempts: int
    """Tries started so far."""
    trying: bool
    """A try is under way (else the next one is due at ``due_at``)."""
    due_at: datetime
    created_at: datetime
    what: str
    """The task state it carries, ``artifact`` or ``message``."""


async def waiting_deliveries(
    session: AsyncSession, tenant_id: str, *, limit: int
) -> list[WaitingDelivery]:
    """The tenant's notifications not delivered yet, oldest first."""
    rows = await session.execute(_WAITING, {"tenant_id": tenant_id, "limit": limit})
    return [WaitingDelivery(**row._asdict()) for row in rows.all()]


class PushDeliveryRepository:
    """One tenant's notifications waiting for delivery, as held under ``token``.

    Every change but :meth:`enqueue` and :meth:`claim` applies only to a row the
    token still holds: one taken over after its lease ended is left alone.
    """

    def __init__(self, session: AsyncSession, tenant_id: str, token: str) -> None:
        self._session = session
        self._tenant_id = tenant_id
        self._me = token

    async def enqueue(
        self, task_id: str, body: dict[str, Any], *, lease_seconds: float
    ) -> list[tuple[int, str, ClaimedDelivery | None]]:
        """A row per configuration of the task, held under the token for the lease: each
        row's ``(seq, config_id, claimed)``. ``claimed`` is the row held for its first try
        when it is the oldest of its configuration (else None: :meth:`claim` it once the
        older ones are gone)."""
        rows = await self._session.execute(
            _ENQUEUE,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "body": json.dumps(body),
                "me": self._me,
                "lease": lease_seconds,
            },
        )
        return [
            (
                row.seq,
                row.config_id,
                ClaimedDelivery(self._tenant_id, row.seq, task_id, 1, body, dict(row.config))
                if row.attempts
                else None,
            )
            for row in rows.all()
        ]

    async def claim(self, seq: int, *, lease_seconds: float) -> ClaimedDelivery | None:
        """Hold row ``seq`` for one try (counted): None if it is gone, held under another
        token (until ``due_at``), or behind an older notification of its configuration."""
        row = (
            await self._session.execute(
                _CLAIM,
                {"tenant_id": self._tenant_id, "seq": seq, "me": self._me, "lease": lease_seconds},
            )
        ).first()
        if row is None:
            return None
        return ClaimedDelivery(
            self._tenant_id, seq, row.task_id, row.attempts, dict(row.body), dict(row.config)
        )

    async def retry(self, seq: int, *, delay_seconds: float) -> None:
        """Let go of row ``seq``, due again in ``delay_seconds`` (for any sweeper)."""
        await self._session.execute(
            _RETRY,
            {"tenant_id": self._tenant_id, "seq": seq, "me": self._me, "delay": delay_seconds},
        )

    async def release(self, seq: int) -> None:
        """Hand row ``seq`` to whichever sweeper comes next."""
        await self._session.execute(
            _RELEASE, {"tenant_id": self._tenant_id, "seq": seq, "me": self._me}
        )

    async def drop(self, seqs: list[int]) -> None:
        """Forget rows ``seqs`` untried: notifications of writes nobody notifies."""
        await self._session.execute(
            _DROP, {"tenant_id": self._tenant_id, "seqs": seqs, "me": self._me}
        )

    async def done(self, seq: int) -> None:
        """Forget row ``seq``: delivered, or given up on."""
        await self._session.execute(
            _DONE, {"tenant_id": self._tenant_id, "seq": seq, "me": self._me}
        )


async def claim_due_deliveries(
    session: AsyncSession, token: str, *, lease_seconds: float, max_rows: int
) -> list[ClaimedDelivery]:
    """Hold every tenant's due notifications (of each configuration the oldest only) under
    ``token``, each for one try (a system function)."""
    rows = await session.execute(
        _CLAIM_DUE, {"me": token, "lease": lease_seconds, "max_rows": max_rows}
    )
    return [
        ClaimedDelivery(
            row.tenant_id, row.seq, row.task_id, row.attempts, dict(row.body), dict(row.config)
        )
        for row in rows.all()
    ]


async def release_deliveries(session: AsyncSession, instance: str) -> int:
    """Let go of every row held under a token ``<instance>/...``, due at once (a system
    function); how many."""
    return int(await session.scalar(_RELEASE_ALL, {"instance": instance}) or 0)
