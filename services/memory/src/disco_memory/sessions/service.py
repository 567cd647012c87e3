"""Sessions: create, read, list; plans and turns touch them."""

from __future__ import annotations

from disco_common.ids import UtcDatetime, new_id
from disco_common.memory import METADATA_MAX_BYTES, SessionCreate, SessionListQuery, SessionRecord
from disco_common.pagination import Page
from disco_memory._shared import limited_json
from disco_memory.sessions.repository import SessionRepository
from disco_service import Conflict, Paginator

__all__ = ["SessionExists", "create_session", "get_session", "list_sessions", "touch_session"]


class SessionExists(Conflict):
    """409: the caller already has a session with that id."""

    code = "session_exists"


_SESSION_PAGES = Paginator("sessions", tuple[UtcDatetime, str])


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
    repository: SessionRepository, query: SessionListQuery
) -> Page[SessionRecord]:
    """One page of the caller's sessions, most recently active first.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this list.
    """
    request = _SESSION_PAGES.open(query)
    rows = await repository.list(after=request.after, limit=request.fetch)
    items = [SessionRecord.model_validate(dict(row)) for row in rows]
    return request.page(items, key=lambda session: (session.last_activity_at, session.session_id))
