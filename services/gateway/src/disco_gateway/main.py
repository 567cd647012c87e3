"""The gateway service's app: the kit's wiring, the A2A door, cards and the publish bridge."""

from __future__ import annotations

from fastapi import FastAPI

from disco_gateway.a2a.endpoints import a2a_routes
from disco_gateway.a2a.grpc_binding import grpc_lifespan
from disco_gateway.a2a.service import a2a_lifespan
from disco_gateway.cards.endpoints import router as cards_router
from disco_gateway.console.endpoints import console_lifespan, static_files
from disco_gateway.console.endpoints import router as console_router
from disco_gateway.mcp.endpoints import mcp_route
from disco_gateway.mcp.endpoints import router as mcp_router
from disco_gateway.mcp.service import mcp_lifespan
from disco_gateway.publish.endpoints import router as publish_router
from disco_gateway.ratelimits.lifespan import rate_limit_lifespan
from disco_gateway.sessions.endpoints import router as sessions_router
from disco_gateway.sessions.lifespan import sessions_lifespan
from disco_gateway.settings import GatewaySettings
from disco_gateway.state import GatewayState
from disco_service import create_service_app, erasure_follower, run_service

__all__ = ["SERVICE", "create_app", "main"]

SERVICE = GatewaySettings.manifest(module="disco_gateway", start_order=40)
"""How ``disco db upgrade`` and ``disco dev up`` find this service (the ``disco.services`` entry
point of its pyproject.toml); it starts after the registry, which it reads agents from."""

DESCRIPTION = (
    "The door for outside systems. Any A2A v1.0 client discovers disco's agents "
    "(`/.well-known/agent-card.json`, `/a2a/{agent}/.well-known/agent-card.json`) and calls "
    "them over JSON-RPC (`POST /a2a/{agent}`), HTTP+JSON (`/a2a/{agent}/message:send`, "
    "`message:stream`, `tasks/...`) or gRPC (`lf.a2a.v1.A2AService` on "
    "`DISCO_GATEWAY_GRPC_PORT`, the agent in the request's `tenant`): each message becomes an "
    "`action-requests` envelope, and the agent's progress, questions and answer come back as "
    "A2A task states, streamed over SSE (or gRPC), "
    "stored in Postgres and pushed to webhooks. `POST /v1/publish` puts an event on the bus for "
    "clients that cannot speak Kafka. Tenant and user come from the bearer token.\n\n"
    "**Live UI streams.** `ws(s)://…/v1/sessions/{session_id}/stream` (websocket; not listed "
    "below) sends a session's events live as the UI envelope `{id, type, session_id, "
    "execution_id, agent_id, agent_name, timestamp, payload}` — agent events (`agent.*`), the "
    "tool lifecycle (`TOOL_APPROVAL_REQUESTED`, `TOOL_APPROVED`, `TOOL_DENIED`, "
    "`TOOL_EXECUTION_STARTED|SUCCEEDED|FAILED`, `TOOL_LOG`), `HUMAN_INPUT_REQUESTED`/"
    "`HUMAN_INPUT_ANSWERED`, and `ERROR`, `ACK`, `PONG`, `STREAM_GAP`. It takes client messages "
    "`APPROVE_TOOL {tool_call_id, reason?}`, `DENY_TOOL {tool_call_id, reason?}`, `ANSWER "
    "{question_id, answer}`, `SEND_MESSAGE {agent, text | data}`, `PING` (each may carry a "
    "`request_id`, echoed in its `ACK`/`ERROR`). Token: `Authorization: Bearer`, or subprotocols "
    '`["disco.v1", "bearer.<jwt>"]`, or `?access_token=`; a bad or expired token closes '
    "with 4401. `?after=<event id>` replays what was missed first; `?agent=` filters by agent. "
    "The `/v1/sessions/...` HTTP routes below do the same without a websocket.\n\n"
    "**MCP.** `/mcp` is a Model Context Protocol server (Streamable HTTP; protocol versions "
    "2025-06-18, 2025-11-25 and 2026-07-28): every agent skill the caller may call is a tool "
    "`<agent>__<skill>`; a call is an A2A task of that agent. Bearer token as everywhere; "
    "a 401 names `/.well-known/oauth-protected-resource` (RFC 9728).\n\n"
    "**Console.** `/console` is the web console: plans, agents, live sessions, dead letters, "
    "health (sign in with a bearer token)."
)


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database, the bus, the registry client and the
    A2A side start in the lifespan.
    """
    state = GatewayState(settings if settings is not None else GatewaySettings())
    app = create_service_app(
        state,
        title="disco gateway",
        description=DESCRIPTION,
        # Cards first: /a2a/{agent}/.well-known/... must match before the A2A mount.
        routers=[cards_router],
        lifespan_hooks=[
            # First in, last out: the counts of every call are shared on the way out.
            rate_limit_lifespan,
            a2a_lifespan,
            # After the A2A side: a gRPC call finds it started, and it outlives the calls.
            grpc_lifespan,
            # After the A2A side too: MCP calls are A2A tasks (directory, fan-out, store).
            mcp_lifespan,
            sessions_lifespan,
            console_lifespan,
            erasure_follower,
        ],
    )
    # The A2A routes next, before the other routers: a request tries the routes in
    # order, and an A2A call is the commonest request (no other route starts /a2a).
    app.router.routes.extend(a2a_routes(state))
    app.router.routes.append(mcp_route(state))
    for router in (publish_router, sessions_router, console_router, mcp_router):
        app.include_router(router)
    app.mount("/console/static", static_files(), name="console-static")
    return app


def main() -> None:
    """Serve the gateway service until SIGINT/SIGTERM (``python -m disco_gateway``)."""
    settings = GatewaySettings()
    run_service(
        create_app(settings),
        settings,
        # Websocket heartbeats: uvicorn pings every socket and closes the ones that do not answer.
        ws_ping_interval=settings.stream_heartbeat_seconds,
        ws_ping_timeout=settings.stream_heartbeat_seconds,
        ws_per_message_deflate=settings.stream_compression,
    )
