"""The memory service's app: the kit's wiring plus the memory's routers."""

from __future__ import annotations

from fastapi import FastAPI

from disco_memory.settings import MemorySettings
from disco_service import create_service_app, run_service

__all__ = ["create_app", "main"]

DESCRIPTION = (
    "Working memory, task and plan context, plans, sessions, "
    "semantic/episodic/procedural memory and agent-state snapshots."
)


def create_app(settings: MemorySettings | None = None) -> FastAPI:
    """The memory app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database and the bus start in the lifespan.
    """
    return create_service_app(
        settings if settings is not None else MemorySettings(),
        title="disco memory",
        description=DESCRIPTION,
    )


def main() -> None:
    """Serve the memory service until SIGINT/SIGTERM (``python -m disco_memory``)."""
    settings = MemorySettings()
    run_service(create_app(settings), settings)
