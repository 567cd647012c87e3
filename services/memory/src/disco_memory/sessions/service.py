"""Sessions: create, read, list; plans and turns touch them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from disco_common.ids import new_id
from disco_common.memory import METADATA_MAX_BYTES, SessionCreate, SessionRecord
from disco_common.pagination import Page, encode_cursor
from disco_memory._shared import limited_json, read_cursor
from disco_memory.sessions.repository import SessionRepository
from disco_service import Conflict

__all__ = ["SessionExists", "create_session", "get_session", "list_sessions", "touch_session"]


class SessionExists(Conflict):
    """409: the caller already has a session with that id."""

    code = "session_exists"


class _Cursor(BaseModel):
    last_activity_at: datetime
    session_id: str


async def create_session(repository: SessionRepository, body: SessionCreate) -> SessionRecord:
    """Create a session (id generated when not given).

    Raises:
        SessionExists: the caller already has a session with ``body.session_id``.
        PayloadTooLarge: the metadata is over 64 KiB encoded.
    """
    metadata_json = limited_json(body.metadata, limit=METADATA_MAX_BYTES, what="the metadata")
    session_id = body.session_id or new_id()
    row = await repository.create(session_id, name=body.name, metadata_json=metadata_json)
    if row is None:
        raise SessionExists(f"session {session_id!r} exists already")
    return SessionRecord.model_validate(dict(row))


async def touch_session(repository: SessionRepository, session_id: str, *, plans: int = 0) -> None:
    """Record activity in a session, creating it on first use."""
    await repository.touch(session_id, plans=plans)


async def get_session(repository: SessionRepository, session_id: str) -> SessionRecord | None:
    """One of the caller's sessions, or None."""
    row = await repository.get(session_id)
    return SessionRecord.model_validate(dict(row)) if row is not None else None


async def list_sessions(
    repository: SessionRepository, *, cursor: str | None, limit: int
) -> Page[SessionRecord]:
    """One page of the caller's sessions, most recently active first."""
    after = None
    if cursor is not None:
        position = read_cursor(cursor, _Cursor)
        after = (position.last_activity_at, position.session_id)
    rows = await repository.list(after=after, limit=limit + 1)
    items = [SessionRecord.model_validate(dict(row)) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = encode_cursor(
            _Cursor(last_activity_at=last.last_activity_at, session_id=last.session_id)
        )
    return Page[SessionRecord](items=items, next_cursor=next_cursor)
