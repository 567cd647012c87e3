"""Agent-state snapshots (``/v1/memory/snapshots``): an agent's latest state in a session."""

from __future__ import annotations

from pydantic import Field, JsonValue

from disco_common._base import Body
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    EXPECTED_VERSION,
    MAX_INTEGER,
    Versioned,
)

__all__ = [
    "SNAPSHOT_FULL_MAX_BYTES",
    "SNAPSHOT_SLIM_MAX_BYTES",
    "AgentStateSnapshot",
    "AgentStateSnapshotPut",
    "AgentStateSnapshotSummary",
]

SNAPSHOT_FULL_MAX_BYTES = 8 * 1024 * 1024
SNAPSHOT_SLIM_MAX_BYTES = 512 * 1024


class AgentStateSnapshotPut(Body):
    """Store the latest state of an agent in a session
    (``PUT /v1/memory/snapshots/{session_id}/{agent_id}``).

    ``full`` is the lossless serialization, ``slim`` the bounded one for UIs and
    cheap reads; both are stored side by side and replace the previous snapshot.
    """

    full: dict[str, JsonValue] = Field(description="Lossless state, at most 8 MiB encoded.")
    slim: dict[str, JsonValue] = Field(description="Slim state, at most 512 KiB encoded.")
    execution_id: Id | None = None
    status: str | None = Field(default=None, max_length=50, description="The agent's status.")
    format_version: int = Field(
        default=1, ge=1, le=MAX_INTEGER, description="The serializer's format version."
    )
    expected_version: int | None = EXPECTED_VERSION


class AgentStateSnapshotSummary(Versioned):
    """A snapshot without its full state (what listing a session returns)."""

    session_id: Id
    agent_id: Id
    execution_id: Id | None = None
    status: str | None = None
    format_version: int = 1
    slim: dict[str, JsonValue]
    full_bytes: int = Field(ge=0, description="Encoded size of the full state.")
    slim_bytes: int = Field(ge=0, description="Encoded size of the slim state.")
    created_at: UtcDatetime
    updated_at: UtcDatetime


class AgentStateSnapshot(AgentStateSnapshotSummary):
    """A snapshot with its full state."""

    full: dict[str, JsonValue]
