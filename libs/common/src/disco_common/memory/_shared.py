"""What several memory families share: limits, versioned records, visibility, deletes."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, computed_field

from disco_common._base import Record

__all__ = [
    "CONTENT_MAX_CHARS",
    "CONTEXT_MAX_BYTES",
    "EXPECTED_VERSION",
    "MAX_BIGINT",
    "MAX_INTEGER",
    "METADATA_MAX_BYTES",
    "QUERY_TEXT_MAX_CHARS",
    "TTL_MAX_SECONDS",
    "DeleteResult",
    "MemoryVisibility",
    "TtlSeconds",
    "Versioned",
]

CONTEXT_MAX_BYTES = 4 * 1024 * 1024
METADATA_MAX_BYTES = 64 * 1024
CONTENT_MAX_CHARS = 32_000
TTL_MAX_SECONDS = 30 * 86_400
QUERY_TEXT_MAX_CHARS = 8000

TtlSeconds = Annotated[int, Field(ge=1, le=TTL_MAX_SECONDS)]

MAX_INTEGER = 2**31 - 1
"""The largest value of a Postgres ``integer`` column (versions, format versions): a
larger one is refused with the request (422), not by the database."""
MAX_BIGINT = 2**63 - 1
"""The largest value of a Postgres ``bigint`` column (turn sequences)."""


class Versioned(Record):
    """A record written with optimistic concurrency: its version, and that as an etag."""

    version: int = Field(ge=1, description="1 on creation, +1 per write.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def etag(self) -> str:
        """The version as an HTTP entity tag (``"<version>"``)."""
        return f'"{self.version}"'


EXPECTED_VERSION = Field(
    default=None,
    ge=0,
    le=MAX_INTEGER,
    description="Write only if the stored version equals this (0: only if absent); else 409.",
)


class MemoryVisibility(StrEnum):
    """Who can read a memory."""

    PRIVATE = "private"
    """Only the user who wrote it."""
    PUBLIC = "public"
    """Every user of the tenant."""


class DeleteResult(Record):
    """How many records a bulk delete removed."""

    deleted: int = Field(ge=0)
