"""Prometheus metrics of the bus: what a client produced, what a consumer group handled.

An agent started with ``DISCO_METRICS_PORT`` counts into the process-wide
:func:`default_bus_metrics` and serves them (:func:`serve_metrics`); a service
counts into its own registry, rendered on its ``/metrics``. Labels are
bounded: the consumer group (agent name), the logical topic, the event type,
the error class, the partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

__all__ = [
    "BusMetrics",
    "InFlight",
    "LagSampler",
    "default_bus_metrics",
    "serve_metrics",
    "stop_metrics",
]

_log = structlog.get_logger("disco.bus")

_HANDLER_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class BusMetrics:
    """The bus's counters, histograms and gauges, registered on one registry.

    Args:
        registry: where they are registered (the default: prometheus_client's
            process-wide registry, what :func:`serve_metrics` serves).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else REGISTRY
        self.registry = registry
        self.produced = Counter(
            "disco_bus_produced",
            "Envelopes the broker acknowledged, by publishing client, topic and event type.",
            ["client", "topic", "event_type"],
            registry=registry,
        )
        self.produce_failures = Counter(
            "disco_bus_produce_failures",
            "Publishes that failed (refused by the producer or the broker).",
            ["client", "topic", "event_type"],
            registry=registry,
        )
        self.consumed = Counter(
            "disco_bus_consumed",
            "Envelopes handed to a handler (once each, however many attempts).",
            ["group", "topic", "event_type"],
            registry=registry,
        )
        self.handler_duration = Histogram(
            "disco_bus_handler_duration_seconds",
            "Time of one handler attempt, by event type.",
            ["group", "topic", "event_type"],
            buckets=_HANDLER_BUCKETS,
            registry=registry,
        )
        self.handler_failures = Counter(
            "disco_bus_handler_failures",
            "Handler attempts that raised, by error class.",
            ["group", "topic", "event_type", "error_type"],
            registry=registry,
        )
        self.retries = Counter(
            "disco_bus_handler_retries",
            "Handler attempts after the first (retries with backoff).",
            ["group", "topic", "event_type"],
            registry=registry,
        )
        self.dead_letters = Counter(
            "disco_bus_dead_lettered",
            "Records a consumer group gave up on and copied to <topic>.dlq.",
            ["group", "topic", "error_type"],
            registry=registry,
        )
        self.in_flight = Gauge(
            "disco_bus_handlers_in_flight",
            "Handler calls running now.",
            ["group"],
            registry=registry,
        )
        self._in_flight: dict[str, InFlight] = {}
        self.lag = Gauge(
            "disco_bus_consumer_lag",
            "Records of a partition the group has not handled yet (end offset minus "
            "the next offset to handle), sampled every DISCO_METRICS_LAG_INTERVAL_SECONDS.",
            ["group", "topic", "partition"],
            registry=registry,
        )

    def in_flight_of(self, group: str) -> InFlight:
        """The count behind ``in_flight`` for ``group``, shared by every consumer of the
        group here: the bus adds to it per handler call (a plain int, no lock) and the
        gauge reads it when scraped."""
        counter = self._in_flight.get(group)
        if counter is None:
            counter = self._in_flight[group] = InFlight()
            self.in_flight.labels(group).set_function(counter.read)
        return counter


class InFlight:
    """Handler calls running now in one group (changed on the event loop only)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def read(self) -> float:
        return float(self.count)


_default: BusMetrics | None = None
_default_lock = threading.Lock()


def default_bus_metrics() -> BusMetrics:
    """The process-wide :class:`BusMetrics` on prometheus_client's default registry."""
    global _default
    with _default_lock:
        if _default is None:
            _default = BusMetrics()
        return _default


_servers: dict[tuple[str, int], tuple[WSGIServer, threading.Thread, int]] = {}


def serve_metrics(port: int, host: str = "127.0.0.1") -> None:
    """Serve the default registry on ``http://host:port/metrics`` (in a thread), with the
    process's probes: ``/healthz`` and ``/readyz`` (see :mod:`disco.bus._probes`).

    Several agents of one process share the server: each call adds a user,
    each :func:`stop_metrics` removes one; the last one stops it.
    """
    from disco.bus._probes import serve

    with _default_lock:
        key = (host, port)
        entry = _servers.get(key)
        if entry is not None:
            server, thread, users = entry
            _servers[key] = (server, thread, users + 1)
            return
        server, thread = serve(port, host)
        _servers[key] = (server, thread, 1)


def stop_metrics(port: int, host: str = "127.0.0.1") -> None:
    """Release one user of the metrics server on ``host:port`` (see :func:`serve_metrics`)."""
    with _default_lock:
        key = (host, port)
        entry = _servers.get(key)
        if entry is None:
            return
        server, thread, users = entry
        if users > 1:
            _servers[key] = (server, thread, users - 1)
            return
        del _servers[key]
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


class LagSampler:
    """Sets ``disco_bus_consumer_lag`` of a group's partitions every ``interval`` seconds.

    Lag is the partition's end offset minus the next offset the group must
    handle: what this member finished (``handled``), else what the group
    committed, else the partition's start.
    """

    def __init__(
        self,
        metrics: BusMetrics,
        consumer: AIOKafkaConsumer,
        *,
        group: str,
        logical: Callable[[str], str],
        handled: Callable[[TopicPartition], int | None],
        interval: float,
    ) -> None:
        self._metrics = metrics
        self._consumer = consumer
        self._group = group
        self._logical = logical
        self._handled = handled
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._labelled: set[TopicPartition] = set()

    def start(self) -> None:
        """Start sampling (in a task of the running loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"disco-lag-{self._group}")

    async def stop(self) -> None:
        """Stop sampling and drop this member's lag series (another member reports them)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.forget(self._labelled)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop the lag series of partitions this member no longer owns."""
        for tp in list(partitions):
            with contextlib.suppress(KeyError):
                self._metrics.lag.remove(self._group, self._logical(tp.topic), str(tp.partition))
            self._labelled.discard(tp)

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except (KafkaError, OSError, TimeoutError) as exc:
                _log.debug("lag sample failed", group=self._group, error=repr(exc))
            await asyncio.sleep(self._interval)

    async def sample(self) -> None:
        """Measure the lag of every owned partition once."""
        consumer = self._consumer
        owned = set(consumer.assignment())
        self.forget(self._labelled - owned)
        if not owned:
            return
        ends = await consumer.end_offsets(list(owned))
        starts: dict[TopicPartition, int] | None = None
        for tp in owned:
            position = self._handled(tp)
            if position is None:
                position = await consumer.committed(tp)
            if position is None:
                if starts is None:
                    starts = await consumer.beginning_offsets(list(owned))
                position = starts.get(tp, 0)
            end = ends.get(tp)
            if end is None:
                continue
            self._metrics.lag.labels(self._group, self._logical(tp.topic), str(tp.partition)).set(
                max(0, end - position)
            )
            self._labelled.add(tp)
