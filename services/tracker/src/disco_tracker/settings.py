"""The tracker service's settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from disco_service import ServiceSettings

__all__ = ["TrackerSettings"]


class TrackerSettings(ServiceSettings):
    """Settings of the tracker service: the shared ``DISCO_*`` ones, and its port."""

    service_name: ClassVar[str] = "tracker"

    port: int = Field(
        default=8083,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_TRACKER_PORT"),
        description="HTTP port (DISCO_TRACKER_PORT).",
    )
    hitl_sweep_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        description="How often unanswered questions past their deadline are timed out.",
    )
    hitl_consumer_group: str = Field(
        default="disco-tracker",
        pattern=r"^[A-Za-z0-9._-]{1,100}$",
        description="Consumer group of the tracker's instances on notification-events.",
    )
    ingest_consumer_group: str = Field(
        default="disco-tracker-ingest",
        pattern=r"^[A-Za-z0-9._-]{1,100}$",
        description=(
            "Consumer group of the tracker's instances on system-events, action-requests and "
            "action-results (the read model); the topic prefix is added on the broker."
        ),
    )
    ingest_batch_size: int = Field(
        default=1000,
        ge=1,
        le=10_000,
        description=(
            "Envelopes applied in one group (one database transaction per tenant), at "
            "most; also the most one partition hands over at once."
        ),
    )
    ingest_linger_ms: int = Field(
        default=50,
        ge=0,
        le=5_000,
        description=(
            "How long the envelopes the partitions hand over wait for more before they are "
            "applied together, to apply more per transaction (throughput under a steady "
            "stream, for this much latency); also the shortest wait of its fetches, and of "
            "the HITL watch's."
        ),
    )
    timeline_data_max_bytes: int = Field(
        default=4096,
        ge=0,
        le=1_000_000,
        description=(
            "Envelopes up to this size keep their data in the timeline; larger ones keep "
            "only their summary."
        ),
    )
    retention_days: float = Field(
        default=30.0,
        gt=0,
        le=3650,
        description=(
            "How long finished plans (with their tasks and timelines), and what ran outside "
            "any plan, are kept after they ended."
        ),
    )
    feed_retention_hours: float = Field(
        default=24.0,
        gt=0,
        le=24 * 365,
        description="How long feed entries are kept (a client resumes within this time).",
    )
    retention_sweep_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="How often expired rows are removed.",
    )
    retention_batch_size: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Plans (and rows of each other kind) removed per transaction.",
    )
    feed_poll_seconds: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description=(
            "How often a feed stream looks for changes when no notification woke it "
            "(notifications wake it at once)."
        ),
    )
