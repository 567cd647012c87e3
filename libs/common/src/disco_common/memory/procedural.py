"""Procedural memory (``/v1/memory/procedural``): how-tos found by the situation they fit."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, JsonValue, StringConstraints, model_validator

from disco_common._base import Body, Description, Metadata, Record, ShortText
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    CONTENT_MAX_CHARS,
    EXPECTED_VERSION,
    QUERY_TEXT_MAX_CHARS,
    MemoryVisibility,
    Versioned,
)
from disco_common.pagination import PageQuery

__all__ = [
    "Procedure",
    "ProcedureCreate",
    "ProcedureHit",
    "ProcedureListQuery",
    "ProcedureSearchQuery",
    "ProcedureUpdate",
]


class ProcedureCreate(Body):
    """Store a procedure: what to do in a situation (``POST /v1/memory/procedural``)."""

    name: ShortText = Field(description="Short name, e.g. `refund a duplicate charge`.")
    trigger: Description = Field(
        min_length=1, description="The situation it applies to (what search matches against)."
    )
    steps: list[Annotated[str, StringConstraints(min_length=1, max_length=4000)]] = Field(
        default_factory=list, max_length=100, description="Ordered steps."
    )
    instructions: str = Field(
        default="", max_length=CONTENT_MAX_CHARS, description="Free-form instructions."
    )
    agent_id: Id | None = Field(default=None, description="The agent it is for (all if absent).")
    visibility: MemoryVisibility = Field(default=MemoryVisibility.PRIVATE)
    metadata: Metadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_content(self) -> Self:
        if not self.steps and not self.instructions:
            raise ValueError("a procedure needs steps or instructions")
        return self


class ProcedureUpdate(Body):
    """Change a procedure; only the fields given change."""

    name: ShortText | None = None
    trigger: Description | None = Field(default=None, min_length=1)
    steps: list[Annotated[str, StringConstraints(min_length=1, max_length=4000)]] | None = Field(
        default=None, max_length=100
    )
    instructions: str | None = Field(default=None, max_length=CONTENT_MAX_CHARS)
    agent_id: Id | None = None
    visibility: MemoryVisibility | None = None
    metadata: Metadata | None = None
    expected_version: int | None = EXPECTED_VERSION

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if not self.model_fields_set - {"expected_version"}:
            raise ValueError("give at least one field to change")
        return self


class Procedure(Versioned):
    """A stored procedure."""

    procedure_id: Id
    name: str
    trigger: str
    steps: list[str] = Field(default_factory=list)
    instructions: str = ""
    agent_id: Id | None = None
    visibility: MemoryVisibility
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    created_at: UtcDatetime
    updated_at: UtcDatetime


class ProcedureListQuery(PageQuery):
    """Filters for listing procedures."""

    agent_id: Id | None = None


class ProcedureSearchQuery(Body):
    """Find the procedures most relevant to a situation."""

    situation: str = Field(min_length=1, max_length=QUERY_TEXT_MAX_CHARS)
    agent_id: Id | None = None
    limit: int = Field(default=5, ge=1, le=50)
    threshold: float | None = Field(default=None, ge=-1.0, le=1.0)


class ProcedureHit(Record):
    """A procedure and how relevant it is."""

    procedure: Procedure
    score: float
