"""Applying a batch of envelopes to the read model: one transaction per tenant.

Within a tenant's transaction: the timeline rows go in first (``ON CONFLICT DO
NOTHING``: what was applied before is a duplicate and says nothing more),
then the new envelopes' patches are folded and merged into plans, tasks and
groups, the counts added, and the changes appended to the feed. The caller
commits the consumed offsets after the transactions committed, so a crash in
between re-delivers envelopes that are then found in the timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from disco_common.envelope import Envelope
from disco_service import Database
from disco_tracker.hitl.service import DEFAULT_TENANT
from disco_tracker.ingest.facts import Reading, Unmatched, read_envelope
from disco_tracker.ingest.patches import Fold, PendingAnswer
from disco_tracker.ingest.repository import IngestRepository

__all__ = ["Applied", "Consumed", "apply_batch"]


@dataclass(frozen=True, slots=True)
class Consumed:
    """One envelope read from the bus."""

    topic: str
    """Its logical topic (without the prefix)."""
    envelope: Envelope
    size: int
    """The bytes of its record value (decides whether its data is kept)."""


@dataclass(slots=True)
class Applied:
    """What a batch did."""

    applied: int = 0
    """Envelopes applied for the first time."""
    duplicates: int = 0
    """Envelopes seen before (redelivered or published twice)."""
    problems: list[Reading] = field(default_factory=list)
    """Envelopes whose data could not be read (their timeline row was kept)."""


async def apply_batch(
    database: Database, batch: Sequence[Consumed], *, data_max_bytes: int
) -> Applied:
    """Apply ``batch`` to the read model, one transaction per tenant (in order of arrival).

    Raises:
        Exception: a database error; the transactions that committed before it
            stay (re-applying them is harmless), the rest rolled back.
    """
    by_tenant: dict[str, list[Consumed]] = {}
    for item in batch:
        by_tenant.setdefault(item.envelope.tenant_id or DEFAULT_TENANT, []).append(item)
    outcome = Applied()
    for tenant, items in by_tenant.items():
        async with database.unit_of_work(tenant) as session:
            await _apply(IngestRepository(session, tenant), items, data_max_bytes, outcome)
    return outcome


async def _apply(
    repository: IngestRepository, items: list[Consumed], data_max_bytes: int, outcome: Applied
) -> None:
    readings: list[Reading] = []
    seen: set[str] = set()
    for item in items:
        if item.envelope.id in seen:
            outcome.duplicates += 1
            continue
        seen.add(item.envelope.id)
        readings.append(
            read_envelope(item.topic, item.envelope, keep_data=item.size <= data_max_bytes)
        )
    new = await repository.insert_events([reading.row for reading in readings])
    outcome.duplicates += len(readings) - len(new)
    fold = Fold()
    unmatched: list[Unmatched] = []
    for reading in readings:
        if reading.row.event_id not in new:
            continue
        outcome.applied += 1
        reading.fold_into(fold)
        if reading.unmatched is not None:
            unmatched.append(reading.unmatched)
        if reading.problem is not None:
            outcome.problems.append(reading)
    if not new:
        return
    # Requests of this batch, by correlation id: answers naming no task match them.
    requested = {
        patch.correlation_id: patch.task_id
        for patch in fold.tasks.values()
        if patch.requested_at is not None and patch.correlation_id is not None
    }
    if unmatched:
        known = await repository.tasks_by_correlation(
            u.answer.correlation_id for u in unmatched if u.answer.correlation_id not in requested
        )
        keep: list[PendingAnswer] = []
        for match in unmatched:
            correlation_id = match.answer.correlation_id
            task_id = requested.get(correlation_id) or known.get(correlation_id)
            if task_id is None:
                keep.append(match.answer)
            else:
                fold.task(match.answer.patch(task_id, match.response_event))
        await repository.keep_pending(keep)
    for kept in await repository.claim_pending(requested):
        pending = PendingAnswer(**kept)
        fold.task(pending.patch(requested[pending.correlation_id]))
    # Rows in key order: concurrent writers lock them in the same order (no deadlock).
    plans = [fold.plans[key] for key in sorted(fold.plans)]
    tasks = [fold.tasks[key] for key in sorted(fold.tasks)]
    await repository.upsert_plans(plans)
    await repository.upsert_tasks(tasks)
    await repository.upsert_groups([fold.groups[key] for key in sorted(fold.groups)])
    await repository.add_counts([fold.counts[key] for key in sorted(fold.counts)])
    await repository.append_feed(
        plans=[(patch.plan_id, patch.cause) for patch in plans if patch.cause is not None],
        tasks=[(patch.task_id, patch.cause) for patch in tasks],
    )
