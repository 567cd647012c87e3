"""Working memory (``/v1/memory/working``): plan-scoped key/value with an optional TTL."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, JsonValue, StringConstraints

from disco_common._base import Body
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    EXPECTED_VERSION,
    TtlSeconds,
    Versioned,
)

__all__ = [
    "WORKING_MEMORY_VALUE_MAX_BYTES",
    "MemoryKey",
    "WorkingMemoryEntry",
    "WorkingMemoryPut",
]

WORKING_MEMORY_VALUE_MAX_BYTES = 1024 * 1024

MemoryKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*$"),
]
"""A working-memory key: letters, digits and ``._:@-`` (safe in a URL path segment)."""


class WorkingMemoryPut(Body):
    """Write one key of a plan's working memory (``PUT /v1/memory/working/{plan_id}/{key}``)."""

    value: JsonValue = Field(description="Any JSON value, at most 1 MiB encoded.")
    ttl_seconds: TtlSeconds | None = Field(
        default=None, description="Forget the key this long after the write (kept if absent)."
    )
    expected_version: int | None = EXPECTED_VERSION


class WorkingMemoryEntry(Versioned):
    """One key of a plan's working memory."""

    plan_id: Id
    key: MemoryKey
    value: JsonValue
    expires_at: UtcDatetime | None = Field(default=None, description="When the key is forgotten.")
    created_at: UtcDatetime
    updated_at: UtcDatetime
