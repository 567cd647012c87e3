"""Working memory: what the routes ask for, in terms of the repository."""

from __future__ import annotations

from datetime import timedelta

from disco_common.ids import utcnow
from disco_common.memory import (
    WORKING_MEMORY_VALUE_MAX_BYTES,
    WorkingMemoryEntry,
    WorkingMemoryPut,
)
from disco_common.pagination import Page, PageQuery
from disco_memory._shared import VersionConflict, limited_json
from disco_memory.working.repository import WorkingMemoryRepository
from disco_service import Paginator

__all__ = ["clear_plan", "delete_entry", "get_entry", "list_entries", "put_entry"]


_ENTRY_PAGES = Paginator("working_memory", tuple[str])


async def get_entry(
    repository: WorkingMemoryRepository, plan_id: str, key: str
) -> WorkingMemoryEntry | None:
    """The live entry, or None (absent or expired)."""
    row = await repository.get(plan_id, key)
    return WorkingMemoryEntry.model_validate(dict(row)) if row is not None else None


async def put_entry(
    repository: WorkingMemoryRepository,
    plan_id: str,
    key: str,
    body: WorkingMemoryPut,
    *,
    user_id: str,
    expected: int | None,
) -> WorkingMemoryEntry:
    """Write one key.

    Raises:
        PayloadTooLarge: the value is over 1 MiB encoded.
        VersionConflict: ``expected`` is not the stored version.
    """
    value_json = limited_json(
        body.value, limit=WORKING_MEMORY_VALUE_MAX_BYTES, what="the working-memory value"
    )
    expires_at = (
        utcnow() + timedelta(seconds=body.ttl_seconds) if body.ttl_seconds is not None else None
    )
    row = await repository.put(
        plan_id,
        key,
        user_id=user_id,
        value_json=value_json,
        expires_at=expires_at,
        expected=expected,
    )
    if row is None:
        assert expected is not None
        current = await repository.current_version(plan_id, key)
        raise VersionConflict(
            f"working-memory key {key!r} of plan {plan_id!r}", expected=expected, current=current
        )
    return WorkingMemoryEntry.model_validate(dict(row))


async def delete_entry(repository: WorkingMemoryRepository, plan_id: str, key: str) -> bool:
    """Forget one key; whether it was there."""
    return await repository.delete(plan_id, key)


async def clear_plan(repository: WorkingMemoryRepository, plan_id: str) -> int:
    """Forget every key of a plan; how many there were."""
    return await repository.clear(plan_id)


async def list_entries(
    repository: WorkingMemoryRepository, plan_id: str, query: PageQuery
) -> Page[WorkingMemoryEntry]:
    """One page of a plan's live keys, in key order.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this plan's list.
    """
    request = _ENTRY_PAGES.open(query, scope=plan_id)
    rows = await repository.list(plan_id, after=request.after, limit=request.fetch)
    items = [WorkingMemoryEntry.model_validate(dict(row)) for row in rows]
    return request.page(items, key=lambda entry: (entry.key,))
