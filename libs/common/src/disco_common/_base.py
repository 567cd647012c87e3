"""Base classes and small shared types for the DTO modules (private).

Two kinds of models, two configs:

- bodies (what a caller sends, and definitions nested in them) forbid unknown
  fields, so a typo is a 422 instead of a silently ignored option;
- records (what a service returns) ignore unknown fields, so an older client
  keeps reading a newer service, and can be built from ORM rows
  (``from_attributes``).

A2A objects (:mod:`disco_common.a2a`, :mod:`disco_common.a2a_cards`) are
:class:`Wire` models: the specification's camelCase JSON.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints
from pydantic.alias_generators import to_camel

__all__ = [
    "DESCRIPTION_MAX_CHARS",
    "METADATA_MAX_KEYS",
    "Body",
    "Description",
    "Metadata",
    "Record",
    "ShortText",
    "Wire",
]

DESCRIPTION_MAX_CHARS = 4000
METADATA_MAX_KEYS = 64


class Body(BaseModel):
    """A request body or a definition nested in one: unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid")


class Record(BaseModel):
    """What a service returns: unknown fields ignored, buildable from ORM rows."""

    model_config = ConfigDict(from_attributes=True)


Description = Annotated[str, Field(max_length=DESCRIPTION_MAX_CHARS)]
"""Free text for people and LLMs, at most 4,000 characters."""

ShortText = Annotated[str, StringConstraints(min_length=1, max_length=200)]
"""A short non-empty label (a name, a reason), at most 200 characters."""

Metadata = Annotated[dict[str, JsonValue], Field(max_length=METADATA_MAX_KEYS)]
"""Free-form JSON attributes, at most 64 top-level keys."""


class Wire(BaseModel):
    """The specification's JSON: camelCase names; unknown fields ignored (the protocol grows)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=False
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the specification's JSON (camelCase, absent fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
