"""The memory service's app: the kit's wiring plus the memory's routers and jobs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from disco_memory.dedup.endpoints import router as dedup_router
from disco_memory.embeddings import EmbeddingProvider
from disco_memory.episodic.endpoints import router as episodic_router
from disco_memory.erasure.endpoints import router as erasure_router
from disco_memory.expiry import ttl_sweeper
from disco_memory.plan_context.endpoints import router as plan_context_router
from disco_memory.plans.endpoints import router as plans_router
from disco_memory.procedural.endpoints import router as procedural_router
from disco_memory.semantic.endpoints import router as semantic_router
from disco_memory.semantic.repository import SearchPool, configure_search
from disco_memory.sessions.endpoints import router as sessions_router
from disco_memory.settings import MemorySettings
from disco_memory.snapshots.endpoints import router as snapshots_router
from disco_memory.startup import check_hnsw_options, check_vector_columns
from disco_memory.state import MemoryState
from disco_memory.steps.endpoints import router as steps_router
from disco_memory.task_context.endpoints import router as task_context_router
from disco_memory.working.endpoints import router as working_router
from disco_service import create_service_app, run_service

__all__ = ["SERVICE", "create_app", "main"]

SERVICE = MemorySettings.manifest(module="disco_memory", start_order=20)
"""How ``disco db upgrade`` and ``disco dev up`` find this service (the ``disco.services``
entry point of its pyproject.toml)."""

DESCRIPTION = (
    "Working memory, task and plan context, plans, sessions, "
    "semantic/episodic/procedural memory and agent-state snapshots."
)

# FastAPI tries the routers in order, and skipping one costs about 7 µs (its routes
# are tried one by one), so the hottest go first (the paths of different routers
# never overlap): dedup marks are checked and made for every envelope a Worker or
# Planner handles (last, they took 80 µs of route matching each); then the vector
# query, and the contexts every task and plan step reads and saves, and the step records.
ROUTERS = (
    dedup_router,
    semantic_router,
    task_context_router,
    plan_context_router,
    steps_router,
    working_router,
    snapshots_router,
    plans_router,
    sessions_router,
    episodic_router,
    procedural_router,
    erasure_router,
)


@asynccontextmanager
async def embeddings(state: MemoryState) -> AsyncIterator[None]:
    """Start the embedding model, and refuse to serve unless the vector columns fit it."""
    embedder = state.runtime.embedder
    await embedder.start()
    try:
        database = state.require_database()
        configure_search(database.engine, ef_search=state.settings.hnsw_ef_search)
        await check_vector_columns(database, embedder)
        settings = state.settings
        await check_hnsw_options(
            database, m=settings.hnsw_m, ef_construction=settings.hnsw_ef_construction
        )
        yield
    finally:
        await embedder.stop()


@asynccontextmanager
async def semantic_search(state: MemoryState) -> AsyncIterator[None]:
    """Open the similarity query's connection pool while the app runs."""
    settings = state.settings
    # A client span per query only when spans leave the process, as for the
    # engine's statements (disco_service.create_service_app).
    traced = settings.otel_sql_spans and settings.otel_exporter_otlp_endpoint is not None
    tracer = state.tracer_provider.get_tracer("disco_memory.search") if traced else None
    state.search = await SearchPool.open(settings, tracer=tracer)
    try:
        yield
    finally:
        search, state.search = state.search, None
        await search.close(settings.shutdown_grace_seconds)


@asynccontextmanager
async def expiry(state: MemoryState) -> AsyncIterator[None]:
    """Run the TTL sweeper while the app runs."""
    async with ttl_sweeper(state.require_database(), state.settings, state.sweep_metrics):
        yield


def create_app(
    settings: MemorySettings | None = None, *, embedder: EmbeddingProvider | None = None
) -> FastAPI:
    """The memory app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database, the bus and the embedding model start
    in the lifespan. ``embedder`` replaces the provider the settings name.
    """
    state = MemoryState(settings if settings is not None else MemorySettings(), embedder=embedder)
    return create_service_app(
        state,
        title="disco memory",
        description=DESCRIPTION,
        routers=ROUTERS,
        lifespan_hooks=(embeddings, semantic_search, expiry),
    )


def main() -> None:
    """Serve the memory service until SIGINT/SIGTERM (``python -m disco_memory``)."""
    settings = MemorySettings()
    run_service(create_app(settings), settings)
