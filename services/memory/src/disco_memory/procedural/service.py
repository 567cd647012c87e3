"""Procedural memory: full CRUD, and search by relevance to a situation."""

from __future__ import annotations

from disco_common.ids import UtcDatetime, new_id
from disco_common.memory import (
    METADATA_MAX_BYTES,
    MemoryVisibility,
    Procedure,
    ProcedureCreate,
    ProcedureHit,
    ProcedureListQuery,
    ProcedureSearchQuery,
    ProcedureUpdate,
)
from disco_common.pagination import Page
from disco_memory._shared import VersionConflict, encoded_json, limited_json
from disco_memory.procedural.repository import ProcedureRepository
from disco_memory.runtime import MemoryRuntime
from disco_memory.semantic.repository import set_search_options
from disco_service import Paginator, UnprocessableEntity

__all__ = [
    "create_procedure",
    "delete_procedure",
    "get_procedure",
    "list_procedures",
    "search_procedures",
    "update_procedure",
]


_PROCEDURE_PAGES = Paginator("procedures", tuple[UtcDatetime, str])


def _searchable(name: str, trigger: str) -> str:
    # What a situation is compared with: the trigger says when it applies; the
    # name often sums it up.
    return f"{name}. {trigger}"


async def create_procedure(
    repository: ProcedureRepository, runtime: MemoryRuntime, body: ProcedureCreate
) -> Procedure:
    """Store a procedure, embedded by its name and trigger."""
    metadata_json = limited_json(body.metadata, limit=METADATA_MAX_BYTES, what="the metadata")
    embedding = await runtime.embed_one(_searchable(body.name, body.trigger))
    row = await repository.insert(
        new_id(),
        name=body.name,
        trigger=body.trigger,
        steps=encoded_json(body.steps),
        instructions=body.instructions,
        agent_id=body.agent_id,
        is_public=body.visibility is MemoryVisibility.PUBLIC,
        metadata=metadata_json,
        embedding=embedding,
        model=runtime.embedder.model_name,
    )
    return Procedure.model_validate(dict(row))


async def get_procedure(repository: ProcedureRepository, procedure_id: str) -> Procedure | None:
    """A procedure the caller may read, or None."""
    row = await repository.get(procedure_id)
    return Procedure.model_validate(dict(row)) if row is not None else None


async def update_procedure(
    repository: ProcedureRepository,
    runtime: MemoryRuntime,
    procedure_id: str,
    body: ProcedureUpdate,
    *,
    expected: int | None,
) -> Procedure | None:
    """Change the given fields of one of the caller's procedures; None if it has none such.

    Raises:
        VersionConflict: ``expected`` is not the stored version.
        UnprocessableEntity: the change would leave neither steps nor instructions.
    """
    row = await repository.get_own_for_update(procedure_id)
    if row is None:
        return None
    current = Procedure.model_validate(dict(row))
    if expected is not None and expected != current.version:
        raise VersionConflict(
            f"procedure {procedure_id!r}", expected=expected, current=current.version
        )
    changes = body.model_dump(exclude_unset=True, exclude={"expected_version"})
    merged = current.model_copy(
        update={k: v for k, v in changes.items() if v is not None or k == "agent_id"}
    )
    if not merged.steps and not merged.instructions:
        raise UnprocessableEntity("a procedure needs steps or instructions")
    metadata_json = limited_json(merged.metadata, limit=METADATA_MAX_BYTES, what="the metadata")
    embedding = None
    if (merged.name, merged.trigger) != (current.name, current.trigger):
        embedding = await runtime.embed_one(_searchable(merged.name, merged.trigger))
    updated = await repository.update(
        procedure_id,
        name=merged.name,
        trigger=merged.trigger,
        steps=encoded_json(merged.steps),
        instructions=merged.instructions,
        agent_id=merged.agent_id,
        is_public=MemoryVisibility(merged.visibility) is MemoryVisibility.PUBLIC,
        metadata=metadata_json,
        embedding=embedding,
        model=runtime.embedder.model_name if embedding is not None else None,
    )
    return Procedure.model_validate(dict(updated))


async def delete_procedure(repository: ProcedureRepository, procedure_id: str) -> bool:
    """Delete one of the caller's procedures; whether it was there."""
    return await repository.delete(procedure_id)


async def list_procedures(
    repository: ProcedureRepository, query: ProcedureListQuery
) -> Page[Procedure]:
    """One page of the procedures the caller may read, newest first.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this list and these filters.
    """
    request = _PROCEDURE_PAGES.open(query)
    rows = await repository.list_readable(
        agent_id=query.agent_id, after=request.after, limit=request.fetch
    )
    items = [Procedure.model_validate(dict(row)) for row in rows]
    return request.page(items, key=lambda procedure: (procedure.created_at, procedure.procedure_id))


async def search_procedures(
    repository: ProcedureRepository, runtime: MemoryRuntime, query: ProcedureSearchQuery
) -> list[ProcedureHit]:
    """The procedures most relevant to a situation, best first (cosine similarity)."""
    embedding = await runtime.embed_query(query.situation)
    if query.limit > runtime.settings.hnsw_ef_search:
        await set_search_options(repository.session, ef_search=query.limit)
    rows = await repository.search(
        embedding=embedding, agent_id=query.agent_id, limit=query.limit, threshold=query.threshold
    )
    return [
        ProcedureHit(procedure=Procedure.model_validate(dict(row)), score=float(row["score"]))
        for row in rows
    ]
