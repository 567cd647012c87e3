"""``python -m disco_<service>``: serve one app with uvicorn."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI
from opentelemetry import trace

from disco.bus import tune_gc
from disco_service._logging import configure_logging
from disco_service._server import guarded_http_protocol
from disco_service._settings import ServiceSettings
from disco_service._state import get_state

__all__ = ["run_service", "server_config"]

# uvicorn's own exit code for "the app did not start".
_STARTUP_FAILURE = 3


def server_config(
    app: FastAPI,
    settings: ServiceSettings,
    *,
    ws_ping_interval: float | None = 20.0,
    ws_ping_timeout: float | None = 20.0,
    ws_per_message_deflate: bool = True,
) -> uvicorn.Config:
    """The uvicorn configuration a service runs with (bounds on slow clients included)."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds),
        timeout_keep_alive=settings.http_keep_alive_seconds,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        http=guarded_http_protocol(settings.http_head_timeout_seconds),
        ws_ping_interval=ws_ping_interval,
        ws_ping_timeout=ws_ping_timeout,
        ws_per_message_deflate=ws_per_message_deflate,
    )


def run_service(
    app: FastAPI,
    settings: ServiceSettings,
    *,
    ws_ping_interval: float | None = 20.0,
    ws_ping_timeout: float | None = 20.0,
    ws_per_message_deflate: bool = True,
) -> None:
    """Serve ``app`` on ``settings.host:settings.port`` until SIGINT/SIGTERM.

    No reload, one process (scale by running more). On a signal uvicorn stops
    accepting, lets in-flight requests finish for up to
    ``DISCO_SHUTDOWN_GRACE_SECONDS``, then runs the lifespan's shutdown (outbox
    drained, bus flushed, pool closed).

    ``ws_ping_interval``/``ws_ping_timeout``: websocket heartbeats (uvicorn pings every
    socket and closes one that does not answer in time). ``ws_per_message_deflate``:
    whether a websocket client that offers compression gets it.

    Raises:
        SystemExit: with code 3 when the app failed to start (e.g. the broker
            was unreachable), so a supervisor sees the failure.
    """
    configure_logging(settings)
    # In a real process the service's provider is the global one, so SDK code
    # that traces (the bus's consumer spans) joins the service's traces.
    trace.set_tracer_provider(get_state(app).tracer_provider)
    config = server_config(
        app,
        settings,
        ws_ping_interval=ws_ping_interval,
        ws_ping_timeout=ws_ping_timeout,
        ws_per_message_deflate=ws_per_message_deflate,
    )
    server = uvicorn.Server(config)
    # Keep the cyclic collector off what lives as long as the process (the app).
    tune_gc(collect=True)
    server.run()
    if not server.started:
        raise SystemExit(_STARTUP_FAILURE)
