"""Step records: record a step once (the first record wins), read an envelope's journal."""

from __future__ import annotations

import json
from datetime import timedelta

from disco_common.ids import utcnow
from disco_common.steps import STEP_RESULT_MAX_BYTES, StepJournal, StepRecord, StepRecordPut
from disco_memory._shared import limited_json
from disco_memory.steps.repository import StepRepository

__all__ = ["journal", "record_step"]


async def record_step(
    repository: StepRepository, group: str, envelope_id: str, body: StepRecordPut
) -> tuple[StepRecord, bool]:
    """Record the step; the stored record and whether it is new (a live record is
    kept as it was, and answered).

    Raises:
        PayloadTooLarge: the result is over 1 MiB encoded.
        NulCharacter: the result holds a NUL character.
    """
    result = limited_json(body.result, limit=STEP_RESULT_MAX_BYTES, what="the step's result")
    expires_at = utcnow() + timedelta(seconds=body.ttl_seconds) if body.ttl_seconds else None
    created, stored, expires, at = await repository.record(
        group, envelope_id, body.name, result, expires_at=expires_at
    )
    record = StepRecord(
        group=group,
        envelope_id=envelope_id,
        name=body.name,
        result=json.loads(stored),
        expires_at=expires,
        created_at=at,
    )
    return record, bool(created)


async def journal(repository: StepRepository, group: str, envelope_id: str) -> StepJournal:
    """The live steps recorded for ``envelope_id`` in ``group``, oldest first."""
    rows = await repository.journal(group, envelope_id)
    return StepJournal(
        group=group,
        envelope_id=envelope_id,
        steps=[
            StepRecord(
                group=group,
                envelope_id=envelope_id,
                name=name,
                result=json.loads(result),
                expires_at=expires,
                created_at=at,
            )
            for name, result, expires, at in rows
        ],
    )
