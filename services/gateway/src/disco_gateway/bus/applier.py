"""The gateway's consumer group: what must be applied once, durably, by some instance.

The fan-out (:mod:`disco_gateway.bus.fanout`) shows each instance what it
streams live; it keeps no position. What must not be lost — an agent's answer
arriving while no instance follows the task (the one that did was killed, or
none was up) — is read by all instances together as one consumer group: each
envelope is handled by one instance, at least once, and its offset committed
only after it was applied. A later instance starts where the last one stopped.

:func:`hand_over` lets the live path go first: an applier handler waits until
the envelope is ``seconds`` old before it looks, so that the instance following
the task live (which sees it at the same time) has applied it by then, and the
applier finds nothing left to do. Envelopes arrive in time order, so the waits
overlap: the group trails the bus by ``seconds``, it does not slow down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from disco.bus import BusClient, BusConsumer
from disco_common.envelope import Envelope
from disco_common.ids import utcnow
from disco_service import retry_while_unavailable

__all__ = ["GroupApplier", "hand_over"]

Handler = Callable[[Envelope], Awaitable[None]]

_MAX_FETCH_WAIT_FLOOR_MS = 500


class GroupApplier:
    """A consumer group over the gateway's instances (idempotent ``start``/``stop``).

    Args:
        bus: the service's bus client (DLQ, settings).
        group: the group's name (the topic prefix is added on the broker).
        trail_seconds: how far behind the bus the group may read (the handover
            delay): its fetches wait up to a sixth of it, at most 500 ms, rather
            than the 1 ms a consumer that must answer at once uses on the
            embedded broker (``BusConsumer``'s ``fetch_wait_floor_ms``).
    """

    def __init__(self, bus: BusClient, group: str, *, trail_seconds: float) -> None:
        floor_ms = max(1, min(_MAX_FETCH_WAIT_FLOOR_MS, int(trail_seconds * 1000 / 6)))
        self._consumer = BusConsumer(bus, group, fetch_wait_floor_ms=floor_ms)

    def on(self, topic: str, event_type: str) -> Callable[[Handler], Handler]:
        """Decorator: apply ``event_type`` envelopes of ``topic`` with the function.

        While the database is away the handler waits for it (the partition
        pauses) rather than failing its retries into the DLQ.
        """
        register = self._consumer.on(topic, event_type)

        def decorate(handler: Handler) -> Handler:
            register(retry_while_unavailable(handler))
            return handler

        return decorate

    async def start(self) -> None:
        """Join the group and start applying."""
        await self._consumer.start()

    async def stop(self, grace: float = 10.0) -> None:
        """Finish what is being applied, commit, leave the group."""
        await self._consumer.stop(grace)


async def hand_over(envelope: Envelope, seconds: float) -> None:
    """Wait until ``envelope`` is ``seconds`` old (at most ``seconds``; see the module docs)."""
    age = (utcnow() - envelope.time).total_seconds()
    wait = min(seconds, seconds - age)
    if wait > 0:
        await asyncio.sleep(wait)
