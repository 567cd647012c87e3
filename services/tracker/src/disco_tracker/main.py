"""The tracker service's app: the kit's wiring plus the tracker's routers."""

from __future__ import annotations

from fastapi import FastAPI

from disco_service import create_service_app, run_service
from disco_tracker.hitl.consumer import hitl_watch
from disco_tracker.hitl.endpoints import router as hitl_router
from disco_tracker.settings import TrackerSettings
from disco_tracker.state import TrackerState

__all__ = ["SERVICE", "create_app", "main"]

SERVICE = TrackerSettings.manifest(module="disco_tracker", start_order=30)
"""How ``disco db upgrade`` and ``disco dev up`` find this service (the ``disco.services``
entry point of its pyproject.toml)."""

DESCRIPTION = "Plan and task progress, timelines, metrics and HITL timeouts."


def create_app(settings: TrackerSettings | None = None) -> FastAPI:
    """The tracker app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database and the bus start in the lifespan.
    """
    return create_service_app(
        TrackerState(settings if settings is not None else TrackerSettings()),
        title="disco tracker",
        description=DESCRIPTION,
        routers=[hitl_router],
        lifespan_hooks=[hitl_watch],
    )


def main() -> None:
    """Serve the tracker service until SIGINT/SIGTERM (``python -m disco_tracker``)."""
    settings = TrackerSettings()
    run_service(create_app(settings), settings)
