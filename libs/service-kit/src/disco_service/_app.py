"""``create_service_app``: everything a disco service shares, wired once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Annotated

import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.types import Scope

from disco.bus import BusClient
from disco_service._auth import TokenVerifier
from disco_service._db import Database
from disco_service._errors import error_responses, install_error_handlers
from disco_service._health import health_router
from disco_service._logging import configure_logging
from disco_service._metrics import ServiceMetrics, metrics_router
from disco_service._middleware import BodySizeLimitMiddleware, RequestContextMiddleware
from disco_service._outbox import OutboxRelay
from disco_service._settings import ServiceSettings
from disco_service._state import ReadinessCheck, ServiceState, get_state
from disco_service._tracing import create_tracer_provider, start_export

__all__ = ["BusDep", "LifespanHook", "create_service_app", "get_bus"]

log = structlog.get_logger("disco_service")

LifespanHook = Callable[[ServiceState], AbstractAsyncContextManager[None]]
"""A service's own start/stop step, entered after the kit's (database, bus, relay)
and exited before them: ``@asynccontextmanager async def sweeper(state): ...``."""

_UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _untraced(scope: Scope) -> bool:
    # Probes and scrapes every few seconds would drown the traces that matter.
    return scope.get("path") in _UNTRACED_PATHS


def _database_check(database: Database, timeout: float) -> ReadinessCheck:
    async def check() -> None:
        await database.ping(timeout)

    return check


def _kafka_check(bus: BusClient, timeout: float) -> ReadinessCheck:
    async def check() -> None:
        if not await bus.ping(timeout):
            raise ConnectionError(f"no answer from {bus.settings.kafka_bootstrap}")

    return check


def create_service_app(
    settings: ServiceSettings,
    *,
    title: str,
    version: str = "0.1.0",
    description: str = "",
    routers: Sequence[APIRouter] = (),
    lifespan_hooks: Sequence[LifespanHook] = (),
    schema: str | None = None,
    database: bool = True,
    bus: bool = True,
    outbox: bool = True,
) -> FastAPI:
    """A FastAPI app with everything a disco service shares.

    Wires: settings; the database (engine, tenant-scoped request sessions) and
    the Kafka :class:`~disco.bus.BusClient`, both created in the lifespan;
    the outbox relay (publish after commit); bearer-token auth; the stable
    error shape for every error; ``/healthz``, ``/readyz`` and ``/metrics``
    (unauthenticated); structured logs with request, trace and tenant ids; the
    request body limit; OpenTelemetry server spans.

    Args:
        settings: the service's settings (a :class:`ServiceSettings` subclass).
        title: the OpenAPI title.
        version: the OpenAPI version.
        description: the OpenAPI description.
        routers: the service's routers, included in order.
        lifespan_hooks: the service's own start/stop steps (see :data:`LifespanHook`).
        schema: the Postgres schema the service owns (default: ``settings.service_name``).
        database: create the database and check it in ``/readyz``.
        bus: start the bus client and check Kafka in ``/readyz``.
        outbox: run the outbox relay (needs ``database`` and ``bus``).

    Returns:
        The app; run it with :func:`disco_service.run_service` or any ASGI server.
    """
    if outbox and not (database and bus):
        raise ValueError("outbox=True needs database=True and bus=True")
    owned_schema = schema or settings.service_name
    state = ServiceState(
        settings=settings,
        schema=owned_schema,
        metrics=ServiceMetrics(settings.service_name),
        verifier=TokenVerifier(settings),
        tracer_provider=create_tracer_provider(settings),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings)
        exporting = start_export(state.tracer_provider, settings)
        timeout = settings.readiness_timeout_seconds
        try:
            async with AsyncExitStack() as stack:
                if database:
                    db = Database(settings, schema=owned_schema)
                    stack.push_async_callback(db.dispose)
                    state.database = db
                    state.readiness_checks["database"] = _database_check(db, timeout)
                if bus:
                    client = BusClient(
                        settings,
                        name=f"disco-{settings.service_name}",
                        source=f"disco://service/{settings.service_name}",
                    )
                    # A broker that is down at start fails the start, loudly:
                    # the orchestrator restarts us; at run time /readyz reports it.
                    await client.start()
                    stack.push_async_callback(client.stop)
                    state.bus = client
                    state.readiness_checks["kafka"] = _kafka_check(client, timeout)
                if outbox and state.database is not None and state.bus is not None:
                    relay = OutboxRelay(
                        state.database,
                        state.bus,
                        batch_size=settings.outbox_batch_size,
                        sweep_interval_seconds=settings.outbox_sweep_interval_seconds,
                        metrics=state.metrics,
                    )
                    await relay.start()
                    stack.push_async_callback(relay.stop, settings.shutdown_grace_seconds)
                    state.relay = relay
                for hook in lifespan_hooks:
                    await stack.enter_async_context(hook(state))
                log.info(
                    "service_started",
                    database=settings.redacted_database_url() if database else None,
                    kafka=settings.kafka_bootstrap if bus else None,
                    topic_prefix=settings.topic_prefix,
                    otlp_export=exporting,
                )
                yield
                log.info("service_stopping")
        finally:
            state.database = state.bus = state.relay = None
            state.readiness_checks.clear()
            # Flushes spans still queued for export; bounded by the exporter's timeout.
            await asyncio.to_thread(state.tracer_provider.shutdown)

    app = FastAPI(
        title=title,
        version=version,
        description=description,
        lifespan=lifespan,
        # Every route may answer these; authenticated routers add 401/403
        # themselves: APIRouter(responses=error_responses(401, 403)).
        responses=error_responses(422, 500),
        # FastAPI's own OpenTelemetry: server spans continuing an incoming
        # `traceparent`, plus spans for dependencies and the endpoint. Metrics
        # are Prometheus' (/metrics) and logs structlog's, so those are off.
        telemetry={
            "tracer_provider": state.tracer_provider,
            "metrics": False,
            "logs": False,
            # Spans per dependency and serialisation cost more than many routes
            # themselves; the server span is what traces need. Opt in to see more.
            "operation_spans": settings.otel_operation_spans,
            "exclude": _untraced,
        },
    )
    app.state.disco = state
    install_error_handlers(app)
    # add_middleware puts each new one outside the previous: the body limit runs
    # inside the request context, so refused bodies are counted and logged too.
    # FastAPI's telemetry wraps the whole stack, so the server span is current here.
    app.add_middleware(
        BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes, metrics=state.metrics
    )
    app.add_middleware(RequestContextMiddleware, metrics=state.metrics)
    app.include_router(health_router)
    app.include_router(metrics_router)
    for router in routers:
        app.include_router(router)
    return app


async def get_bus(request: Request) -> BusClient:
    """FastAPI dependency: the service's started bus client.

    For publishing that is not tied to a database transaction; anything a
    transaction causes goes through :func:`disco_service.publish_after_commit`.
    """
    return get_state(request).require_bus()


BusDep = Annotated[BusClient, Depends(get_bus)]
"""The service's bus client."""
