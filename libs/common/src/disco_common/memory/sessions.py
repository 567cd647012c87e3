"""Sessions (``/v1/memory/sessions``): conversations that group plans and turns."""

from __future__ import annotations

from pydantic import Field, JsonValue

from disco_common._base import Body, Metadata, Record
from disco_common.ids import Id, UtcDatetime
from disco_common.pagination import PageQuery

__all__ = [
    "SessionCreate",
    "SessionListQuery",
    "SessionRecord",
]


class SessionCreate(Body):
    """Create a session (``POST /v1/memory/sessions``): a conversation grouping plans."""

    session_id: Id | None = Field(default=None, description="Choose the id (generated if absent).")
    name: str | None = Field(default=None, max_length=200)
    metadata: Metadata = Field(default_factory=dict)


class SessionRecord(Record):
    """A session with its activity."""

    session_id: Id
    name: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    plan_count: int = Field(ge=0, description="Plans created in this session.")
    created_at: UtcDatetime
    last_activity_at: UtcDatetime = Field(description="Last plan or turn in the session.")


class SessionListQuery(PageQuery):
    """Listing sessions (most recently active first)."""
