"""The gateway service's app: the kit's wiring, the A2A door, cards and the publish bridge."""

from __future__ import annotations

from fastapi import FastAPI

from disco_gateway.a2a.endpoints import a2a_routes
from disco_gateway.a2a.service import a2a_lifespan
from disco_gateway.cards.endpoints import router as cards_router
from disco_gateway.publish.endpoints import router as publish_router
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
    "them over JSON-RPC (`POST /a2a/{agent}`) or HTTP+JSON (`/a2a/{agent}/message:send`, "
    "`message:stream`, `tasks/...`): each message becomes an `action-requests` envelope, and the "
    "agent's progress, questions and answer come back as A2A task states, streamed over SSE, "
    "stored in Postgres and pushed to webhooks. `POST /v1/publish` puts an event on the bus for "
    "clients that cannot speak Kafka. Tenant and user come from the bearer token."
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
        routers=[cards_router, publish_router],
        lifespan_hooks=[a2a_lifespan, erasure_follower],
    )
    app.router.routes.extend(a2a_routes(state))
    return app


def main() -> None:
    """Serve the gateway service until SIGINT/SIGTERM (``python -m disco_gateway``)."""
    settings = GatewaySettings()
    run_service(create_app(settings), settings)
