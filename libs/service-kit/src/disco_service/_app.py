"""``create_service_app``: everything a disco service shares, wired once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib import metadata
from typing import Any, TypeVar

import structlog
from fastapi import APIRouter, FastAPI
from starlette.types import Scope

from disco.bus import BusClient
from disco_service._db import Database
from disco_service._errors import error_responses, install_error_handlers
from disco_service._logging import configure_logging
from disco_service._middleware import RequestContextMiddleware
from disco_service._operations import operations_router
from disco_service._outbox import OutboxRelay
from disco_service._state import ReadinessCheck, ServiceState
from disco_service._tracing import instrument_database, instrument_http_clients, start_export

__all__ = ["LifespanHook", "create_service_app"]

log = structlog.get_logger("disco_service")

StateT = TypeVar("StateT", bound=ServiceState[Any])

LifespanHook = Callable[[StateT], AbstractAsyncContextManager[None]]
"""A service's own start/stop step, handed the service's state; entered after the
kit's (database, bus, relay) and exited before them:
``@asynccontextmanager async def sweeper(state: RegistryState) -> AsyncIterator[None]: ...``."""

_UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _untraced(scope: Scope) -> bool:
    # Probes and scrapes every few seconds would drown the traces that matter.
    return scope.get("path") in _UNTRACED_PATHS


async def _settle(task: asyncio.Task[None]) -> None:
    """Cancel a start still running (the service's start failed) and wait for it."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: the start's own error was raised already, if any


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
    state: StateT,
    *,
    title: str,
    version: str | None = None,
    description: str = "",
    routers: Sequence[APIRouter] = (),
    lifespan_hooks: Sequence[LifespanHook[StateT]] = (),
    database: bool = True,
    bus: bool = True,
    outbox: bool = True,
) -> FastAPI:
    """A FastAPI app with everything a disco service shares.

    Wires: the service's state (``app.state.disco``, see :class:`ServiceState`);
    the database (engine, tenant-scoped request sessions) and the Kafka
    :class:`~disco.bus.BusClient`, both created in the lifespan; the outbox
    relay (publish after commit); bearer-token auth; the stable error shape for
    every error; ``/healthz``, ``/readyz`` and ``/metrics`` (unauthenticated);
    structured logs with request, trace and tenant ids; the request body limit;
    OpenTelemetry server spans.

    Args:
        state: the service's state, built from its settings (``RegistryState(settings)``,
            or a plain ``ServiceState(settings)``); it names the schema the service owns.
        title: the OpenAPI title.
        version: the OpenAPI version (default: the installed disco's, from VERSION).
        description: the OpenAPI description.
        routers: the service's routers, included in order.
        lifespan_hooks: the service's own start/stop steps (see :data:`LifespanHook`).
        database: create the database and check it in ``/readyz``.
        bus: start the bus client and check Kafka in ``/readyz``.
        outbox: run the outbox relay (needs ``database`` and ``bus``).

    Returns:
        The app; run it with :func:`disco_service.run_service` or any ASGI server.
    """
    if outbox and not (database and bus):
        raise ValueError("outbox=True needs database=True and bus=True")
    settings = state.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings)
        exporting = start_export(state.tracer_provider, settings)
        if settings.otel_http_client_spans:
            instrument_http_clients(state.tracer_provider)
        timeout = settings.readiness_timeout_seconds
        try:
            async with AsyncExitStack() as stack:
                if database:
                    db = Database(settings, schema=state.schema)
                    if settings.otel_sql_spans and exporting:
                        # Spans nobody exports would cost every statement a span
                        # (about 8% of a small request's CPU) for nothing.
                        instrument_database(db, state.tracer_provider)
                    stack.push_async_callback(db.dispose)
                    state.database = db
                    state.readiness_checks["database"] = _database_check(db, timeout)
                if bus:
                    client = BusClient(
                        settings,
                        name=f"disco-{settings.service_name}",
                        source=f"disco://service/{settings.service_name}",
                        tracer_provider=state.tracer_provider,
                        metrics=state.metrics.bus,
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
                starting: list[asyncio.Task[None]] = []
                for hook in lifespan_hooks:
                    try:
                        await stack.enter_async_context(hook(state))
                    finally:
                        begun = state._take_starting()
                        for task in begun:
                            # Exits run last in, first out: settled before its hook's exit.
                            stack.push_async_callback(_settle, task)
                        starting += begun
                if starting:
                    await asyncio.gather(*starting)
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
        version=version or metadata.version("disco-service-kit"),
        description=description,
        lifespan=lifespan,
        # Every route may answer these (503: the database or broker is away);
        # authenticated routers add 401/403
        # themselves: APIRouter(responses=error_responses(401, 403)).
        responses=error_responses(422, 500, 503),
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
    _declare_framework_errors(app)
    # One pure-ASGI middleware for the request context and the body limit (refused
    # bodies are counted and logged too). FastAPI's telemetry wraps the whole stack,
    # so the server span is current here.
    app.add_middleware(
        RequestContextMiddleware,
        metrics=state.metrics,
        max_bytes=settings.max_body_bytes,
        read_timeout=settings.http_body_timeout_seconds,
    )
    app.include_router(operations_router)
    for router in routers:
        app.include_router(router)
    return app


# What an operation may answer before its handler runs: one taking a body, for a
# body that is not UTF-8 JSON (400), trickles in too slowly (408) or is too large
# (413); one needing a bearer token, for a token missing, invalid or expired (401).
_BODY_ERRORS = (400, 408, 413)
_AUTH_ERRORS = (401,)


def _declare_framework_errors(app: FastAPI) -> None:
    """Declare :data:`_BODY_ERRORS` and :data:`_AUTH_ERRORS` where ``app``'s OpenAPI needs them.

    The middleware, FastAPI's body parsing and the bearer dependency answer them
    whatever the route, so the document says so on every operation they apply to
    (those mounted later included) without each route listing them.
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # FastAPI's, cached on the app: the additions happen once
        for path_item in schema.get("paths", {}).values():
            for operation in path_item.values():
                if not isinstance(operation, dict):
                    continue
                statuses = (_BODY_ERRORS if "requestBody" in operation else ()) + (
                    _AUTH_ERRORS if operation.get("security") else ()
                )
                responses = operation.setdefault("responses", {})
                for status, response in error_responses(*statuses).items():
                    responses.setdefault(
                        str(status),
                        {
                            "description": response["description"],
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/ErrorResponse"}
                                }
                            },
                        },
                    )
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
