"""``BusMetrics`` without a broker: the in-flight gauge the consumers count into."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from disco.bus import BusMetrics


def test_the_in_flight_gauge_reads_the_count_of_its_group_when_scraped() -> None:
    registry = CollectorRegistry()
    metrics = BusMetrics(registry)

    billing = metrics.in_flight_of("billing")
    assert metrics.in_flight_of("billing") is billing  # one count per group, shared
    billing.count += 3
    metrics.in_flight_of("search").count += 1
    billing.count -= 1

    def sample(group: str) -> float | None:
        return registry.get_sample_value("disco_bus_handlers_in_flight", {"group": group})

    assert sample("billing") == 2
    assert sample("search") == 1
