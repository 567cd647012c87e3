"""How long each fetch may wait at the broker: adaptive polling.

Why it is needed (measured on the embedded Tansu broker, see issue 15):

- Tansu answers a fetch at once when data is there, but an empty fetch does not
  wake up when data arrives: it sleeps, re-checking storage after half the
  wait, then after half the rest, and so on. A record that arrives during a
  wait of ``W`` ms is seen about ``W/6`` ms later on average, so every hop of a
  round trip costs a fraction of ``fetch_max_wait_ms``.
- Tansu's wait loop is ``while elapsed < max_wait && bytes < min_bytes``: with
  ``fetch_max_wait_ms=0`` it never runs, the response carries no topics at all,
  and aiokafka re-fetches at once, forever: nothing is delivered and the client
  burns a core.
- A short fixed wait fixes latency but every consumer then fetches hundreds of
  times a second while idle, and every fetch costs the broker a scan of the
  partition's stored batches; with several consumers on two shared cores the
  broker starves the agents (that is what made a 5 ms wait noisy).

So the wait follows the traffic: the minimum while records flow or a reply is
awaited, then growing with the idle time (``backoff_ratio`` of it) up to the
maximum. Apache Kafka long-polls (a fetch returns as soon as data arrives), so
there both ends default to its usual 500 ms and nothing changes at run time.

aiokafka has no public way to change ``fetch_max_wait_ms`` of a running
consumer; its fetcher reads the private ``_fetch_max_wait_ms`` attribute each
time it builds a request, which is what :class:`FetchPacer` sets.
``tests`` pin that attribute so an aiokafka upgrade that renames it fails
loudly rather than silently polling at a fixed wait.

Every consumer of the bus (a group member, a group-less reader, a reply
listener) gets what it fetches with from :func:`fetch_options`, which derives
it once: the connection, the broker's kind, the waits, the poll size and, for a
group member, the session timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaClient, AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.protocol.fetch import FetchRequest

from disco.settings import BrokerKind, BusSettings

__all__ = ["FetchOptions", "FetchPacer", "broker_kind", "fetch_options"]

_log = structlog.get_logger("disco.bus")

# Broker kind per bootstrap string, found once per process.
_KINDS: dict[str, BrokerKind] = {}
_PROBE_TOPIC = "__disco_broker_probe"
_FETCHER_WAIT = "_fetch_max_wait_ms"


async def broker_kind(settings: BusSettings) -> BrokerKind:
    """Whether ``settings`` reach the embedded (Tansu) broker or a long-polling Kafka.

    ``kafka_broker_kind`` decides unless it is ``"auto"``; then the broker is asked
    once per process: a zero-wait fetch of a topic that does not exist comes back
    with no topics at all from Tansu and with an error for the topic from Kafka.
    When the probe cannot tell, ``"kafka"`` (long waits: always correct, at worst
    slower on Tansu).
    """
    return await _kind(settings, None)


async def _kind(settings: BusSettings, connection: Mapping[str, Any] | None) -> BrokerKind:
    if settings.kafka_broker_kind != "auto":
        return settings.kafka_broker_kind
    bootstrap = settings.kafka_bootstrap
    if (known := _KINDS.get(bootstrap)) is not None:
        return known
    # Two clients starting at once may both ask: harmless, and no lock outlives a loop.
    kind = _KINDS[bootstrap] = await _probe(
        connection if connection is not None else settings.kafka_connection_options()
    )
    return kind


async def _probe(connection: Mapping[str, Any]) -> BrokerKind:
    client = AIOKafkaClient(**connection)
    try:
        await client.bootstrap()
        nodes = client.cluster.brokers()
        if not nodes:
            return "kafka"
        node = min(nodes, key=lambda broker: broker.nodeId).nodeId
        request = FetchRequest(0, 1, 1024, 0, [(_PROBE_TOPIC, [(0, 0, 1024)])])
        response: Any = await asyncio.wait_for(client.send(node, request), 5)
        return "embedded" if not response.topics else "kafka"
    except (KafkaError, OSError, TimeoutError):
        return "kafka"
    finally:
        await client.close()


class FetchPacer:
    """Sets a consumer's fetch wait from its recent traffic.

    Call :meth:`attach` once the consumer started, :meth:`saw_records` when a
    poll returned records, :meth:`apply` before each poll (it returns how long
    the poll should block before looking again), and hold :meth:`urgent` while
    something waits for a record (a reply).
    """

    def __init__(
        self,
        min_wait_ms: int,
        max_wait_ms: int,
        backoff_ratio: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= min_wait_ms <= max_wait_ms:
            raise ValueError("fetch waits need 1 <= min_wait_ms <= max_wait_ms")
        self.min_wait_ms = min_wait_ms
        self.max_wait_ms = max_wait_ms
        self.backoff_ratio = backoff_ratio
        self._clock = clock
        self._last_seen = clock()
        self._urgent = 0
        self._fetcher: Any = None
        self._applied = max_wait_ms

    @property
    def adaptive(self) -> bool:
        """Whether the wait changes at all (not on a long-polling broker)."""
        return self.min_wait_ms < self.max_wait_ms

    @property
    def current_wait_ms(self) -> int:
        """The wait the consumer's next fetch is built with."""
        return self._applied

    def wait_ms(self) -> int:
        """The wait the traffic calls for now."""
        if self._urgent or not self.adaptive:
            return self.min_wait_ms
        idle_ms = (self._clock() - self._last_seen) * 1000
        return int(min(self.max_wait_ms, max(self.min_wait_ms, idle_ms * self.backoff_ratio)))

    def attach(self, consumer: AIOKafkaConsumer) -> None:
        """Drive ``consumer``'s fetch wait (call after ``consumer.start()``)."""
        fetcher = getattr(consumer, "_fetcher", None)
        if fetcher is None or not hasattr(fetcher, _FETCHER_WAIT):
            _log.warning(
                "aiokafka's fetcher has no fetch wait to adapt; polling at a fixed wait",
                wait_ms=self.max_wait_ms,
            )
            return
        self._fetcher = fetcher
        self._applied = self.wait_ms()
        setattr(fetcher, _FETCHER_WAIT, self._applied)

    def saw_records(self) -> None:
        """Records arrived: keep the wait short."""
        self._last_seen = self._clock()

    def apply(self) -> float:
        """Set the wait for the next fetch; return seconds a poll may block before
        calling again (longer when idle, so an idle consumer wakes rarely)."""
        wait = self.wait_ms()
        if wait != self._applied:
            self._applied = wait
            if self._fetcher is not None:
                setattr(self._fetcher, _FETCHER_WAIT, wait)
        return max(0.05, min(0.5, 2 * wait / 1000))

    @contextmanager
    def urgent(self) -> Iterator[None]:
        """Short waits while the block runs (and, once it ends, as after a record)."""
        self._urgent += 1
        self.apply()
        try:
            yield
        finally:
            self._urgent -= 1
            self.saw_records()


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """How one consumer fetches, derived once by :func:`fetch_options`."""

    consumer: Mapping[str, Any]
    """Keyword arguments of its ``AIOKafkaConsumer``: the connection, the longest fetch
    wait, the poll size and, for a group member, the session timing."""
    min_wait_ms: int
    max_wait_ms: int
    backoff_ratio: float

    def pacer(self) -> FetchPacer:
        """A :class:`FetchPacer` with these waits (attach it once the consumer started)."""
        return FetchPacer(self.min_wait_ms, self.max_wait_ms, self.backoff_ratio)


async def fetch_options(
    settings: BusSettings,
    *,
    group: bool = False,
    floor_ms: int | None = None,
    min_poll_records: int | None = None,
) -> FetchOptions:
    """What a consumer of the bus ``settings`` reach fetches with, in one place.

    Args:
        settings: the bus's settings (connection, waits, poll size, session timing).
        group: for a consumer group member: its session timeout and heartbeat, and a
            request timeout that outlives a session (aiokafka insists on it).
        floor_ms: no wait shorter than this, for a consumer that need not see a
            record within milliseconds (see :class:`~disco.bus.BusConsumer`'s
            ``fetch_wait_floor_ms``). On the embedded broker every empty fetch at
            the shortest wait costs it and the consumer a round trip; at 1 ms a
            consumer of a busy topic makes hundreds a second.
        min_poll_records: hand over at least this many records per poll (a batch
            handler's batch), even when ``kafka_max_poll_records`` is lower.
    """
    connection = settings.kafka_connection_options()
    low, high = settings.fetch_waits(await _kind(settings, connection))
    if floor_ms is not None:
        low, high = max(low, floor_ms), max(high, floor_ms)
    consumer = {
        **connection,
        "fetch_max_wait_ms": high,
        "max_poll_records": max(settings.kafka_max_poll_records, min_poll_records or 0),
    }
    if group:
        consumer["session_timeout_ms"] = settings.kafka_session_timeout_ms
        consumer["heartbeat_interval_ms"] = settings.kafka_heartbeat_interval_ms
        consumer["request_timeout_ms"] = max(
            settings.kafka_request_timeout_ms, settings.kafka_session_timeout_ms + 5000
        )
    return FetchOptions(consumer, low, high, settings.kafka_fetch_backoff_ratio)
