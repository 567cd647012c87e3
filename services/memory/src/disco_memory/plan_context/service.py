"""Plan context: save, restore (by plan id or correlation id), delete."""

from __future__ import annotations

from disco_common.memory import CONTEXT_MAX_BYTES, PlanContextRecord, PlanContextStore
from disco_memory._shared import limited_model_json, stored_record
from disco_memory.plan_context.repository import PlanContextRepository
from disco_service import Conflict, UnprocessableEntity

__all__ = [
    "CorrelationClaimed",
    "delete_context",
    "find_by_correlation",
    "get_context",
    "store_context",
]


class CorrelationClaimed(Conflict):
    """409: a correlation id of this context already belongs to another plan."""

    code = "correlation_claimed"


def _record(record_json: str) -> PlanContextRecord:
    return PlanContextRecord.model_validate_json(record_json)


async def store_context(
    repository: PlanContextRepository,
    plan_id: str,
    body: PlanContextStore,
    *,
    expected: int | None,
) -> PlanContextRecord:
    """Save a plan context; each of its ``correlation_ids`` finds it once this commits.

    Raises:
        UnprocessableEntity: ``context.plan_id`` is not ``plan_id``.
        PayloadTooLarge: the context is over 4 MiB encoded.
        CorrelationClaimed: another plan already waits for one of the correlation ids.
        VersionConflict: ``expected`` is not the stored version.
    """
    context = body.context
    if context.plan_id != plan_id:
        raise UnprocessableEntity(
            f"context.plan_id is {context.plan_id!r} but the URL names plan {plan_id!r}; "
            "they must be the same"
        )
    context_json = limited_model_json(context, limit=CONTEXT_MAX_BYTES, what="the plan context")
    stored = await repository.store(
        plan_id,
        session_id=context.session_id,
        correlation_ids=list(dict.fromkeys(context.correlation_ids)),
        context_json=context_json,
        expected=expected,
    )
    return _record(
        stored_record(
            stored,
            what=f"plan context {plan_id!r}",
            expected=expected,
            claimed=CorrelationClaimed,
            ids="correlation ids",
            owner="plan",
        )
    )


async def get_context(repository: PlanContextRepository, plan_id: str) -> PlanContextRecord | None:
    """The context of ``plan_id``, or None."""
    record = await repository.get(plan_id)
    return _record(record) if record is not None else None


async def find_by_correlation(
    repository: PlanContextRepository, correlation_id: str
) -> PlanContextRecord | None:
    """The context of the plan waiting for ``correlation_id``, or None."""
    record = await repository.by_correlation(correlation_id)
    return _record(record) if record is not None else None


async def delete_context(repository: PlanContextRepository, plan_id: str) -> bool:
    """Delete a plan's context; whether it was there."""
    return await repository.delete(plan_id)
