"""The tracker service's app: the kit's wiring plus the tracker's routers."""

from __future__ import annotations

from fastapi import FastAPI

from disco_service import create_service_app, erasure_follower, run_service
from disco_tracker.feed.endpoints import router as feed_router
from disco_tracker.feed.hub import feed_listener
from disco_tracker.hitl.consumer import hitl_watch
from disco_tracker.hitl.endpoints import router as hitl_router
from disco_tracker.ingest.consumer import ingest
from disco_tracker.metrics.endpoints import router as metrics_router
from disco_tracker.plan_types.endpoints import router as plan_types_router
from disco_tracker.plans.endpoints import router as plans_router
from disco_tracker.retention.service import retention_sweeper
from disco_tracker.settings import TrackerSettings
from disco_tracker.state import TrackerState
from disco_tracker.tasks.endpoints import router as tasks_router

__all__ = ["SERVICE", "create_app", "main"]

SERVICE = TrackerSettings.manifest(module="disco_tracker", start_order=30)
"""How ``disco db upgrade`` and ``disco dev up`` find this service (the ``disco.services``
entry point of its pyproject.toml)."""

DESCRIPTION = """The read model of everything that runs on the bus.

It consumes `system-events`, `action-requests` and `action-results` (its own consumer
group) and keeps, per tenant: plans with their state-machine state and sub-plans, tasks
with their agents, attempts, durations and outcomes, fan-out groups, a timeline of every
envelope, and metrics per agent and per event type. Agents never write to it: they
publish on the bus. What a caller registers is a plan type (`POST /v1/tracker/plan-types`),
so that a plan's view shows its state machine.

It also watches questions to humans on `notification-events` (`/v1/tracker/hitl`): a
question whose `timeout_seconds` pass unanswered gets `task.timeout` and a timed-out answer,
and its task fails with `hitl_timeout`. `GET /v1/tracker/feed` streams changes to plans and
tasks as server-sent events, resumable with `Last-Event-ID`. Finished plans are removed
after the retention period."""


def create_app(settings: TrackerSettings | None = None) -> FastAPI:
    """The tracker app (settings from ``DISCO_*`` variables when not given).

    Nothing connects here: the database and the bus start in the lifespan.
    """
    return create_service_app(
        TrackerState(settings if settings is not None else TrackerSettings()),
        title="disco tracker",
        description=DESCRIPTION,
        routers=[
            plans_router,
            tasks_router,
            metrics_router,
            plan_types_router,
            feed_router,
            hitl_router,
        ],
        lifespan_hooks=[feed_listener, ingest, hitl_watch, retention_sweeper, erasure_follower],
    )


def main() -> None:
    """Serve the tracker service until SIGINT/SIGTERM (``python -m disco_tracker``)."""
    settings = TrackerSettings()
    run_service(create_app(settings), settings)
