"""What the tracker holds while it runs: the kit's state, typed with its settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from disco_service import ServiceState
from disco_tracker.feed.hub import FeedHub
from disco_tracker.ingest.metrics import IngestMetrics
from disco_tracker.settings import TrackerSettings

if TYPE_CHECKING:
    from disco.bus import BusConsumer

__all__ = ["TrackerState"]


class TrackerState(ServiceState[TrackerSettings]):
    """The tracker app's state (``app.state.disco``), built by :func:`disco_tracker.create_app`.

    Attributes:
        ingest_metrics: the ingest's Prometheus metrics (on ``/metrics``).
        ingest: the ingest consumer while the app runs (its lifespan hook sets it).
        hitl: the HITL watch's consumer of ``notification-events`` while the app runs.
        feed: wakes the feed's streams when changes are committed.
    """

    def __init__(self, settings: TrackerSettings) -> None:
        super().__init__(settings)
        self.ingest_metrics = IngestMetrics(self.metrics.registry)
        self.ingest: BusConsumer | None = None
        self.hitl: BusConsumer | None = None
        self.feed = FeedHub(settings.feed_poll_seconds)
