"""The gateway service's app: the kit's wiring plus the gateway's routers."""

from __future__ import annotations

from fastapi import FastAPI

from disco_gateway.settings import GatewaySettings
from disco_gateway.state import GatewayState
from disco_service import create_service_app, run_service

__all__ = ["SERVICE", "create_app", "main"]

SERVICE = GatewaySettings.manifest(module="disco_gateway", start_order=40)
"""How ``disco db upgrade`` and ``disco dev up`` find this service (the ``disco.services``
entry point of its pyproject.toml); it starts after the registry, which it reaches."""

DESCRIPTION = "A2A endpoints, UI session streams, the HTTP publish bridge and the A2A task store."


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database and the bus start in the lifespan.
    """
    return create_service_app(
        GatewayState(settings if settings is not None else GatewaySettings()),
        title="disco gateway",
        description=DESCRIPTION,
    )


def main() -> None:
    """Serve the gateway service until SIGINT/SIGTERM (``python -m disco_gateway``)."""
    settings = GatewaySettings()
    run_service(create_app(settings), settings)
