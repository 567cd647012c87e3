"""Dedup marks: look one up, make one (idempotently)."""

from __future__ import annotations

from datetime import timedelta

from disco_common.ids import utcnow
from disco_common.memory import DedupMark, DedupMarkPut
from disco_memory.dedup.repository import DedupRepository

__all__ = ["get_mark", "put_mark"]


async def get_mark(repository: DedupRepository, group: str, event_id: str) -> DedupMark | None:
    """The live mark of ``event_id`` for ``group``, or None."""
    row = await repository.get(group, event_id)
    return DedupMark.model_validate(dict(row)) if row is not None else None


async def put_mark(
    repository: DedupRepository, group: str, event_id: str, body: DedupMarkPut, *, user_id: str
) -> tuple[DedupMark, bool]:
    """Make the mark; the mark and whether it is new (a live one is kept unchanged)."""
    expires_at = (
        utcnow() + timedelta(seconds=body.ttl_seconds) if body.ttl_seconds is not None else None
    )
    row = await repository.put(group, event_id, user_id=user_id, expires_at=expires_at)
    if row is not None:
        return DedupMark.model_validate(dict(row)), True
    existing = await repository.get(group, event_id)
    assert existing is not None  # live a moment ago, in this transaction
    return DedupMark.model_validate(dict(existing)), False
