"""SQL of the session streams (``gateway.session_events``, ``gateway.session_decisions``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["DecisionRow", "SessionEventRepository", "store_batch", "stream_positions"]

_STORE = text(
    "SELECT gateway.store_session_batch(CAST(:batch AS jsonb), CAST(:positions AS jsonb))"
)
_POSITIONS = text(
    "SELECT topic, partition, next_offset FROM gateway.session_stream_positions_of(:topics)"
)
_PURGE = text("SELECT gateway.purge_session_events(:cutoff, :keep)")
_FORGET_POSITIONS = text("SELECT gateway.forget_session_stream_positions(:keep, :cutoff)")
_SEQ_OF = text(
    "SELECT seq FROM gateway.session_events WHERE tenant_id = :tenant_id "
    "AND session_id = :session_id AND event_id = :event_id"
)
_AFTER = text(
    "SELECT seq, event FROM gateway.session_events WHERE tenant_id = :tenant_id "
    "AND session_id = :session_id AND seq > :after "
    "AND (user_id IS NULL OR :all_users OR user_id = :user_id) ORDER BY seq LIMIT :limit"
)
_ABOUT = text(
    "SELECT type, user_id, event FROM gateway.session_events WHERE tenant_id = :tenant_id "
    "AND session_id = :session_id AND ref = :ref AND type = ANY(:types) ORDER BY seq"
)
_DECIDE = text(
    "INSERT INTO gateway.session_decisions "
    "(tenant_id, session_id, kind, ref, decision, decided_by, event_id) "
    "VALUES (:tenant_id, :session_id, :kind, :ref, :decision, :decided_by, :event_id)"
)
_DECISION = text(
    "SELECT decision, decided_by, event_id, created_at FROM gateway.session_decisions "
    "WHERE tenant_id = :tenant_id AND session_id = :session_id AND kind = :kind AND ref = :ref"
)


async def store_batch(
    session: AsyncSession,
    rows: Sequence[dict[str, Any]],
    positions: Mapping[tuple[str, int], int] | None = None,
) -> int:
    """Store a batch of events of any tenants (a system function; the first copy wins), and
    with it the reader's positions after it (``{(topic, partition): next offset}``, topics
    with their environment prefix; a position never goes back)."""
    places = [
        {"topic": topic, "partition": partition, "next_offset": offset}
        for (topic, partition), offset in (positions or {}).items()
    ]
    stored = await session.scalar(
        _STORE, {"batch": json.dumps(list(rows)), "positions": json.dumps(places)}
    )
    return int(stored or 0)


async def stream_positions(
    session: AsyncSession, topics: Sequence[str]
) -> dict[tuple[str, int], int]:
    """The positions stored with the events (:func:`store_batch`) of ``topics``."""
    rows = await session.execute(_POSITIONS, {"topics": list(topics)})
    return {(str(topic), int(partition)): int(offset) for topic, partition, offset in rows.all()}


async def purge(session: AsyncSession, *, cutoff: Any, keep: int) -> int:
    """Delete events older than ``cutoff`` and all but each session's ``keep`` newest."""
    return int(await session.scalar(_PURGE, {"cutoff": cutoff, "keep": keep}) or 0)


async def forget_positions(session: AsyncSession, *, keep: Sequence[str], cutoff: Any) -> int:
    """Forget the stored positions of topics not in ``keep`` that no batch advanced
    since ``cutoff`` (another environment prefix's, long gone); the number forgotten."""
    return int(await session.scalar(_FORGET_POSITIONS, {"keep": list(keep), "cutoff": cutoff}) or 0)


@dataclass(frozen=True)
class DecisionRow:
    """A decision taken through the gateway."""

    decision: str
    decided_by: str
    event_id: str


@dataclass(frozen=True)
class AboutRow:
    """An event about a tool call or a question."""

    type: str
    user_id: str | None
    event: dict[str, Any]


class SessionEventRepository:
    """Reads one tenant's session events and records its decisions."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def seq_of(self, session_id: str, event_id: str) -> int | None:
        """The position of event ``event_id`` in the session (None: not kept)."""
        seq = await self._session.scalar(
            _SEQ_OF,
            {"tenant_id": self._tenant_id, "session_id": session_id, "event_id": event_id},
        )
        return int(seq) if seq is not None else None

    async def after(
        self, session_id: str, after: int, *, limit: int, user_id: str, all_users: bool
    ) -> list[tuple[int, dict[str, Any]]]:
        """The events after position ``after`` that the user may see, oldest first."""
        rows = await self._session.execute(
            _AFTER,
            {
                "tenant_id": self._tenant_id,
                "session_id": session_id,
                "after": after,
                "limit": limit,
                "user_id": user_id,
                "all_users": all_users,
            },
        )
        return [(int(seq), dict(event)) for seq, event in rows.all()]

    async def about(self, session_id: str, ref: str, types: Sequence[str]) -> list[AboutRow]:
        """The events of the session about tool call / question ``ref`` of ``types``."""
        rows = await self._session.execute(
            _ABOUT,
            {
                "tenant_id": self._tenant_id,
                "session_id": session_id,
                "ref": ref,
                "types": list(types),
            },
        )
        return [AboutRow(kind, user, dict(event)) for kind, user, event in rows.all()]

    async def decide(
        self,
        session_id: str,
        kind: str,
        ref: str,
        *,
        decision: str,
        decided_by: str,
        event_id: str,
    ) -> DecisionRow | None:
        """Record the decision; None when one was recorded first (it stands)."""
        values = {
            "tenant_id": self._tenant_id,
            "session_id": session_id,
            "kind": kind,
            "ref": ref,
        }
        try:
            async with self._session.begin_nested():
                await self._session.execute(
                    _DECIDE,
                    {
                        **values,
                        "decision": decision,
                        "decided_by": decided_by,
                        "event_id": event_id,
                    },
                )
        except IntegrityError:
            return None
        return DecisionRow(decision, decided_by, event_id)

    async def decision(self, session_id: str, kind: str, ref: str) -> DecisionRow | None:
        """The decision recorded for ``ref``, if any."""
        row = (
            await self._session.execute(
                _DECISION,
                {"tenant_id": self._tenant_id, "session_id": session_id, "kind": kind, "ref": ref},
            )
        ).first()
        return DecisionRow(row[0], row[1], row[2]) if row is not None else None
