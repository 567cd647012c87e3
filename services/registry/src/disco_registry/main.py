"""The registry service's app: the kit's wiring plus the registry's routers and sweeper."""

from __future__ import annotations

from fastapi import FastAPI

from disco_registry.agents.endpoints import router as agents_router
from disco_registry.asyncapi.endpoints import router as asyncapi_router
from disco_registry.cards.endpoints import router as cards_router
from disco_registry.changes import changes_lifespan
from disco_registry.discovery.endpoints import router as discovery_router
from disco_registry.events.endpoints import router as events_router
from disco_registry.liveness.lifespan import sweeper_lifespan
from disco_registry.payload_schemas.endpoints import router as schemas_router
from disco_registry.settings import RegistrySettings
from disco_registry.state import RegistryState
from disco_service import create_service_app, erasure_follower, run_service

__all__ = ["SERVICE", "create_app", "main"]

SERVICE = RegistrySettings.manifest(module="disco_registry", start_order=10)
"""How ``disco db upgrade`` and ``disco dev up`` find this service (the ``disco.services``
entry point of its pyproject.toml)."""

DESCRIPTION = (
    "Agents, capabilities, event definitions, payload schemas and liveness: how agents "
    "find each other, and how callers learn what an agent consumes and produces."
)


def create_app(settings: RegistrySettings | None = None) -> FastAPI:
    """The registry app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database, the bus, the outbox relay, the
    listener for changes (discovery answers, documents) and the TTL sweeper start
    in the lifespan;
    the heartbeat batcher uses the database once it is there.
    """
    return create_service_app(
        RegistryState(settings if settings is not None else RegistrySettings()),
        title="disco registry",
        description=DESCRIPTION,
        # Discovery first: FastAPI tries routes in order, and discovery is the registry's
        # hottest route (the paths of different routers never overlap).
        routers=[
            discovery_router,
            agents_router,
            cards_router,
            events_router,
            schemas_router,
            asyncapi_router,
        ],
        lifespan_hooks=[changes_lifespan, sweeper_lifespan, erasure_follower],
    )


def main() -> None:
    """Serve the registry service until SIGINT/SIGTERM (``python -m disco_registry``)."""
    settings = RegistrySettings()
    run_service(create_app(settings), settings)
