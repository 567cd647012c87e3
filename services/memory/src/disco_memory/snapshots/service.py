"""Agent-state snapshots: put (size-limited, versioned), get, list a session's."""

from __future__ import annotations

from disco_common.memory import (
    SNAPSHOT_FULL_MAX_BYTES,
    SNAPSHOT_SLIM_MAX_BYTES,
    AgentStateSnapshot,
    AgentStateSnapshotPut,
    AgentStateSnapshotSummary,
)
from disco_memory._shared import VersionConflict, limited_json
from disco_memory.snapshots.repository import SnapshotRepository
from disco_service import Conflict

__all__ = [
    "SnapshotOfAnotherUser",
    "delete_snapshot",
    "get_snapshot",
    "list_snapshots",
    "put_snapshot",
]


class SnapshotOfAnotherUser(Conflict):
    """409: the session's snapshot of this agent belongs to another user of the tenant."""

    code = "owned_by_another_user"


async def put_snapshot(
    repository: SnapshotRepository,
    session_id: str,
    agent_id: str,
    body: AgentStateSnapshotPut,
    *,
    expected: int | None,
) -> AgentStateSnapshotSummary:
    """Replace an agent's latest snapshot in a session.

    Raises:
        PayloadTooLarge: the full state is over 8 MiB or the slim one over 512 KiB.
        VersionConflict: ``expected`` is not the stored version.
        SnapshotOfAnotherUser: the snapshot is another user's (and the caller is not a
            service, an operator or an admin).
    """
    full = limited_json(body.full, limit=SNAPSHOT_FULL_MAX_BYTES, what="the full state")
    slim = limited_json(body.slim, limit=SNAPSHOT_SLIM_MAX_BYTES, what="the slim state")
    row = await repository.put(
        session_id,
        agent_id,
        expected=expected,
        execution_id=body.execution_id,
        status=body.status,
        format_version=body.format_version,
        full=full,
        slim=slim,
        full_bytes=len(full.encode()),
        slim_bytes=len(slim.encode()),
    )
    if row is None:
        found = await repository.owner(session_id, agent_id)
        if found is not None and not repository.reaches(found[0]):
            raise SnapshotOfAnotherUser(
                f"the state of agent {agent_id!r} in session {session_id!r} belongs to another "
                "user: use a session id of your own"
            )
        assert expected is not None
        raise VersionConflict(
            f"the snapshot of agent {agent_id!r} in session {session_id!r}",
            expected=expected,
            current=found[1] if found is not None else None,
        )
    return AgentStateSnapshotSummary.model_validate(dict(row))


async def get_snapshot(
    repository: SnapshotRepository, session_id: str, agent_id: str
) -> AgentStateSnapshot | None:
    """The latest snapshot (full and slim), or None."""
    row = await repository.get(session_id, agent_id)
    return AgentStateSnapshot.model_validate(dict(row)) if row is not None else None


async def list_snapshots(
    repository: SnapshotRepository, session_id: str
) -> list[AgentStateSnapshotSummary]:
    """Each agent's latest snapshot in a session (slim state only), latest first."""
    return [
        AgentStateSnapshotSummary.model_validate(dict(row))
        for row in await repository.list(session_id)
    ]


async def delete_snapshot(repository: SnapshotRepository, session_id: str, agent_id: str) -> bool:
    """Delete an agent's snapshot in a session; whether it was there."""
    return await repository.delete(session_id, agent_id)
