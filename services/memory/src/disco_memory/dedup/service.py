"""Dedup marks: look them up, make them (idempotently), one or a batch at a time."""

from __future__ import annotations

from datetime import datetime, timedelta

from disco_common.dedup import (
    DedupCheck,
    DedupChecked,
    DedupMark,
    DedupMarkPut,
    DedupMarksMade,
    DedupMarksPut,
)
from disco_common.ids import utcnow
from disco_memory.dedup.repository import DedupBatches, DedupRepository

__all__ = ["check_marks", "get_mark", "put_mark", "put_marks"]


async def get_mark(repository: DedupRepository, group: str, event_id: str) -> DedupMark | None:
    """The live mark of ``event_id`` for ``group``, or None."""
    row = await repository.get(group, event_id)
    return DedupMark.model_validate(dict(row)) if row is not None else None


async def put_mark(
    repository: DedupRepository, group: str, event_id: str, body: DedupMarkPut, *, user_id: str
) -> tuple[DedupMark, bool]:
    """Make the mark; the mark and whether it is new (a live one is kept unchanged)."""
    expires_at = _expiry(body.ttl_seconds)
    row = await repository.put(group, event_id, user_id=user_id, expires_at=expires_at)
    if row is not None:
        return DedupMark.model_validate(dict(row)), True
    existing = await repository.get(group, event_id)
    assert existing is not None  # live a moment ago, in this transaction
    return DedupMark.model_validate(dict(existing)), False


async def check_marks(batches: DedupBatches, group: str, body: DedupCheck) -> DedupChecked:
    """Which of the ids asked about ``group`` handled (a live mark), and which it has step
    records of, in the order asked."""
    asked = list(dict.fromkeys(body.event_ids))
    handled, stepped = await batches.live_among(group, asked)
    return DedupChecked(
        handled=[event_id for event_id in asked if event_id in handled],
        stepped=[event_id for event_id in asked if event_id in stepped],
    )


async def put_marks(batches: DedupBatches, group: str, body: DedupMarksPut) -> DedupMarksMade:
    """Make the marks as the caller's user (a live one is kept unchanged); how many are new."""
    created = await batches.put_many(
        group, list(dict.fromkeys(body.event_ids)), expires_at=_expiry(body.ttl_seconds)
    )
    return DedupMarksMade(created=created)


def _expiry(ttl_seconds: int | None) -> datetime | None:
    return utcnow() + timedelta(seconds=ttl_seconds) if ttl_seconds is not None else None
