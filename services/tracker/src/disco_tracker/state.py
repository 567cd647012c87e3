"""What the tracker holds while it runs: the kit's state, typed with its settings."""

from __future__ import annotations

from disco_service import ServiceState
from disco_tracker.settings import TrackerSettings

__all__ = ["TrackerState"]


class TrackerState(ServiceState[TrackerSettings]):
    """The tracker app's state (``app.state.disco``), built by :func:`disco_tracker.create_app`.

    The HITL consumer and sweeper live in their lifespan hook; long-lived
    objects routes need (progress views, caches) belong here.
    """
