"""``/v1/memory/semantic``: facts found by meaning."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import TypeAdapter

from disco_common.ids import Id
from disco_common.memory import (
    EmbeddingModelInfo,
    SemanticHit,
    SemanticMemoryRecord,
    SemanticMemoryUpsert,
    SemanticQuery,
)
from disco_memory.deps import RuntimeDep
from disco_memory.semantic import service
from disco_memory.semantic.repository import SemanticRepository, SemanticSearch
from disco_memory.state import MemoryState
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/semantic", tags=["semantic memory"], route_class=JSONRoute)


async def _repository(session: SessionDep, identity: IdentityDep) -> SemanticRepository:
    return SemanticRepository(session, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[SemanticRepository, Depends(_repository)]


# The hot path answers with JSON serialized once from the models the service built
# (returning the models would make FastAPI validate them again against
# response_model before serializing; response_model still documents the shape).
_HITS = TypeAdapter(list[SemanticHit])


@router.put("", response_model=SemanticMemoryRecord, responses=error_responses(413, 422, 503))
async def upsert_memory(
    body: SemanticMemoryUpsert, repository: RepositoryDep, runtime: RuntimeDep
) -> SemanticMemoryRecord:
    """Store a fact (private to the caller, or public to the tenant).

    Upserts by ``external_id`` when given, else by the content's SHA-256: storing
    the same text twice keeps one memory.
    """
    return await service.upsert(repository, runtime, body)


@router.post("/query", response_model=list[SemanticHit], responses=error_responses(422, 503))
async def query_memories(body: SemanticQuery, identity: IdentityDep, request: Request) -> Response:
    """The caller's (and the tenant's public) memories nearest to a text or vector, best
    first, with their cosine similarity; filter by metadata and a minimum score."""
    # A read of one statement: no unit of work (no BEGIN, no COMMIT). The search pool
    # and the runtime come from the state rather than a dependency of their own (each
    # one FastAPI resolves costs).
    state = MemoryState.of(request)
    search = SemanticSearch(state.require_search(), identity.tenant_id, identity.user_id)
    hits = await service.query(search, state.runtime, body)
    return Response(content=_HITS.dump_json(hits), media_type="application/json")


@router.get("/model", response_model=EmbeddingModelInfo)
async def embedding_model(runtime: RuntimeDep, identity: IdentityDep) -> EmbeddingModelInfo:
    """The model (and vector dimension) this deployment embeds with."""
    return service.model_info(runtime)


@router.get("/{memory_id}", response_model=SemanticMemoryRecord, responses=error_responses(404))
async def get_memory(memory_id: Id, repository: RepositoryDep) -> SemanticMemoryRecord:
    """One memory the caller may read."""
    record = await service.get_memory(repository, memory_id)
    if record is None:
        raise NotFound(f"no memory {memory_id!r} you can read")
    return record


@router.delete(
    "/{memory_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404)
)
async def delete_memory(memory_id: Id, repository: RepositoryDep) -> None:
    """Delete one of the caller's memories."""
    if not await service.delete_memory(repository, memory_id):
        raise NotFound(f"you have no memory {memory_id!r}")
