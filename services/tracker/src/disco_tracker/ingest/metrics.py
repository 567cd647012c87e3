"""Prometheus metrics of the ingest (on the service's ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["IngestMetrics"]

_BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class IngestMetrics:
    """How much the ingest applied, skipped and could not read."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.applied = Counter(
            "disco_tracker_ingested_envelopes",
            "Envelopes applied to the read model for the first time.",
            registry=registry,
        )
        self.duplicates = Counter(
            "disco_tracker_duplicate_envelopes",
            "Envelopes skipped because the timeline already had them (redeliveries, repeats).",
            registry=registry,
        )
        self.rejected = Counter(
            "disco_tracker_rejected_envelopes",
            "Envelopes the read model could not use, by topic and reason: `envelope` (not an "
            "envelope: dead-lettered), `malformed` (data does not fit its type), `unknown` "
            "(an unknown system event type), `database` (failed alone: dead-lettered).",
            ["topic", "reason"],
            registry=registry,
        )
        self.batch_failures = Counter(
            "disco_tracker_ingest_batch_failures",
            "Batch transactions that failed and were retried.",
            registry=registry,
        )
        self.batch_seconds = Histogram(
            "disco_tracker_ingest_batch_seconds",
            "Time to apply one batch.",
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self.last_event_time = Gauge(
            "disco_tracker_ingest_last_event_timestamp_seconds",
            "The time of the newest envelope applied (lag: now minus this).",
            registry=registry,
        )
