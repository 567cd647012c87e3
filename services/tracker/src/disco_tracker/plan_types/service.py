"""Plan types: a planner's state machines, registered per version (immutable)."""

from __future__ import annotations

from sqlalchemy import RowMapping

from disco_common.canonical import json_hash
from disco_common.ids import semver_sort_key
from disco_common.pagination import Page, PageQuery
from disco_common.plans import PlanRegistrationRequest
from disco_common.tracker import PlanTypeRecord
from disco_service import Paginator
from disco_tracker.errors import PlanTypeVersionConflict
from disco_tracker.plan_types.repository import PlanTypeRepository

__all__ = ["get_plan_type", "list_plan_types", "plan_type_record", "register_plan_type"]

# Sort key: (plan_type,), by name.
_TYPE_PAGES = Paginator("plan_types", tuple[str])


def plan_type_record(row: RowMapping) -> PlanTypeRecord:
    """A stored version as :class:`PlanTypeRecord`."""
    return PlanTypeRecord.model_validate(dict(row))


async def register_plan_type(
    repository: PlanTypeRepository, request: PlanRegistrationRequest
) -> tuple[PlanTypeRecord, bool]:
    """Store a version of a plan type; the record and whether it is new.

    Raises:
        PlanTypeVersionConflict: the version exists with another definition.
    """
    plan = request.plan
    definition = plan.model_dump(mode="json")
    content_hash = json_hash(definition)
    row = await repository.insert_if_absent(
        plan_type=plan.plan_type,
        version=request.version,
        sort_key=semver_sort_key(request.version),
        definition=definition,
        content_hash=content_hash,
    )
    if row is not None:
        return plan_type_record(row), True
    existing = await repository.get(plan.plan_type, request.version)
    assert existing is not None  # inserts are never undone
    if existing["content_hash"] != content_hash:
        raise PlanTypeVersionConflict(
            f"plan type {plan.plan_type!r} version {request.version} is registered with another "
            "definition; versions are immutable: register the new definition as a new version",
            details={
                "plan_type": plan.plan_type,
                "version": request.version,
                "existing_content_hash": existing["content_hash"],
                "content_hash": content_hash,
            },
        )
    return plan_type_record(existing), False


async def get_plan_type(
    repository: PlanTypeRepository, plan_type: str, version: str | None = None
) -> PlanTypeRecord | None:
    """A version of a plan type (the latest when ``version`` is None), or None."""
    row = (
        await repository.latest(plan_type)
        if version is None
        else await repository.get(plan_type, version)
    )
    return plan_type_record(row) if row is not None else None


async def list_plan_types(repository: PlanTypeRepository, query: PageQuery) -> Page[PlanTypeRecord]:
    """One page of the latest version of every plan type, by name.

    Raises:
        InvalidCursor: the cursor was not issued by this list.
    """
    request = _TYPE_PAGES.open(query)
    rows = await repository.list_latest(after=request.after, limit=request.fetch)
    return request.page(rows, key=lambda row: (row["plan_type"],), item=plan_type_record)
