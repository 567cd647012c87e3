"""The registry service's app: the kit's wiring plus the registry's routers."""

from __future__ import annotations

from fastapi import FastAPI

from disco_registry.settings import RegistrySettings
from disco_service import create_service_app, run_service

__all__ = ["create_app", "main"]

DESCRIPTION = "Agents, capabilities, event definitions, payload schemas and liveness."


def create_app(settings: RegistrySettings | None = None) -> FastAPI:
    """The registry app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database and the bus start in the lifespan.
    """
    return create_service_app(
        settings if settings is not None else RegistrySettings(),
        title="disco registry",
        description=DESCRIPTION,
    )


def main() -> None:
    """Serve the registry service until SIGINT/SIGTERM (``python -m disco_registry``)."""
    settings = RegistrySettings()
    run_service(create_app(settings), settings)
