"""Prometheus metrics of the discovery cache (on the service's ``/metrics``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from disco_registry.discovery.cache import DiscoveryCache

__all__ = ["DiscoveryCacheMetrics"]


class DiscoveryCacheMetrics(Collector):
    """Read from the cache's own counts when scraped (nothing is counted twice on the
    hot path)."""

    def __init__(self, cache: DiscoveryCache, registry: CollectorRegistry) -> None:
        self._cache = cache
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        answers = CounterMetricFamily(
            "disco_registry_discovery_answers",
            "Discovery answers by where they came from: `cache` (kept by this instance) "
            "or `database` (asked for).",
            labels=["source"],
        )
        answers.add_metric(["cache"], self._cache.served)
        answers.add_metric(["database"], self._cache.asked)
        yield answers
        yield GaugeMetricFamily(
            "disco_registry_discovery_cache_bytes",
            "Size of the discovery answers this instance keeps (characters of JSON text).",
            value=self._cache.size_bytes,
        )
        yield GaugeMetricFamily(
            "disco_registry_discovery_cache_listening",
            "1 while this instance hears discovery changes (and so keeps answers), else 0.",
            value=1 if self._cache.trusted else 0,
        )
