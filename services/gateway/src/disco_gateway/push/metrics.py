"""Prometheus metrics of push notifications (on the gateway's ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["PushMetrics"]


class PushMetrics:
    """What this instance's tries at push notifications came to."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter(
            "disco_gateway_push_attempts",
            "Push notification tries by outcome: delivered; retry (a 5xx, 408, 429 or no "
            "answer); refused (a 4xx, or a URL the policy refuses).",
            ["outcome"],
            registry=registry,
        )
        self.given_up = Counter(
            "disco_gateway_push_given_up",
            "Push notifications given up on: refused, or out of attempts.",
            registry=registry,
        )
