"""Plan context: save, restore (by plan id or correlation id), delete."""

from __future__ import annotations

from pydantic import JsonValue
from sqlalchemy import RowMapping

from disco_common.memory import CONTEXT_MAX_BYTES, PlanContextRecord, PlanContextStore
from disco_memory._shared import VersionConflict, limited_model_json
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


def _record(row: RowMapping) -> PlanContextRecord:
    return PlanContextRecord.model_validate(dict(row))


async def store_context(
    repository: PlanContextRepository,
    plan_id: str,
    body: PlanContextStore,
    *,
    user_id: str,
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
    ids = list(dict.fromkeys(context.correlation_ids))
    claimed = await repository.claimed_elsewhere(plan_id, ids)
    if claimed:
        raise CorrelationClaimed(
            "these correlation ids already belong to other plans: "
            + ", ".join(f"{cid} (plan {owner})" for cid, owner in sorted(claimed.items())),
            details={"claimed": dict[str, JsonValue](claimed)},
        )
    row = await repository.put(
        plan_id,
        session_id=context.session_id,
        user_id=user_id,
        correlation_ids=ids,
        context_json=context_json,
        expected=expected,
    )
    if row is None:
        assert expected is not None
        current = await repository.current_version(plan_id)
        raise VersionConflict(f"plan context {plan_id!r}", expected=expected, current=current)
    await repository.replace_refs(plan_id, ids)
    return _record(row)


async def get_context(repository: PlanContextRepository, plan_id: str) -> PlanContextRecord | None:
    """The context of ``plan_id``, or None."""
    row = await repository.get(plan_id)
    return _record(row) if row is not None else None


async def find_by_correlation(
    repository: PlanContextRepository, correlation_id: str
) -> PlanContextRecord | None:
    """The context of the plan waiting for ``correlation_id``, or None."""
    row = await repository.by_correlation(correlation_id)
    return _record(row) if row is not None else None


async def delete_context(repository: PlanContextRepository, plan_id: str) -> bool:
    """Delete a plan's context; whether it was there."""
    return await repository.delete(plan_id)
