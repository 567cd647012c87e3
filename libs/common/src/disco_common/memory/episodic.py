"""Episodic memory (``/v1/memory/episodic``): conversation turns, recent and searched."""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import Field, JsonValue, model_validator

from disco_common._base import Body, Metadata, Record
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    CONTENT_MAX_CHARS,
    MAX_BIGINT,
    QUERY_TEXT_MAX_CHARS,
)

__all__ = [
    "EpisodicHit",
    "EpisodicRecentQuery",
    "EpisodicRole",
    "EpisodicSearchMode",
    "EpisodicSearchQuery",
    "EpisodicTurn",
    "EpisodicTurnCreate",
    "EpisodicTurnUpdate",
]


class EpisodicRole(StrEnum):
    """Who spoke a turn."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class EpisodicTurnCreate(Body):
    """Append a conversation turn (``POST /v1/memory/episodic``)."""

    session_id: Id = Field(description="The conversation.")
    agent_id: Id = Field(
        description="The agent in the conversation (a stable id; agents usually use their name)."
    )
    role: EpisodicRole
    content: str = Field(max_length=CONTENT_MAX_CHARS)
    plan_id: Id | None = None
    task_id: Id | None = None
    metadata: Metadata = Field(default_factory=dict)


class EpisodicTurnUpdate(Body):
    """Correct a stored turn (``PATCH /v1/memory/episodic/{turn_id}``); only the fields given
    change. New content is embedded again, so search finds the turn by what it says now."""

    content: str | None = Field(default=None, max_length=CONTENT_MAX_CHARS)
    metadata: Metadata | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("give at least one field to change (content, metadata)")
        if "content" in self.model_fields_set and self.content is None:
            raise ValueError("content cannot be null; give the new text")
        return self


class EpisodicTurn(Record):
    """A stored conversation turn."""

    turn_id: Id
    session_id: Id
    agent_id: Id
    role: EpisodicRole
    content: str
    plan_id: Id | None = None
    task_id: Id | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    sequence: int = Field(ge=1, description="Order within the session, increasing.")
    created_at: UtcDatetime


class EpisodicRecentQuery(Body):
    """The last turns of a session (oldest first in the answer)."""

    session_id: Id
    agent_id: Id | None = Field(default=None, description="Only this agent's conversation.")
    limit: int = Field(default=20, ge=1, le=200)
    before_sequence: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BIGINT,
        description="Only turns before this sequence (to page backwards).",
    )


class EpisodicSearchMode(StrEnum):
    """How episodic search scores a turn."""

    SEMANTIC = "semantic"
    """Cosine similarity of meaning."""
    TEXT = "text"
    """Full-text match of the words (score ``rank / (1 + rank)``, in [0, 1))."""
    HYBRID = "hybrid"
    """``0.7 * semantic + 0.3 * text``: meaning first, exact words break ties."""


class EpisodicSearchQuery(Body):
    """Search turns by meaning and text."""

    text: str = Field(min_length=1, max_length=QUERY_TEXT_MAX_CHARS)
    mode: EpisodicSearchMode = Field(default=EpisodicSearchMode.HYBRID)
    session_id: Id | None = Field(default=None, description="Within one session (all if absent).")
    agent_id: Id | None = None
    role: EpisodicRole | None = None
    limit: int = Field(default=10, ge=1, le=100)
    threshold: float | None = Field(default=None, ge=-1.0, le=1.0)


class EpisodicHit(Record):
    """A turn and how well it matches the search."""

    turn: EpisodicTurn
    score: float
