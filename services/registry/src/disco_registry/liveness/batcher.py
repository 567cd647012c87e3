"""Group commit for heartbeats: concurrent heartbeats of a tenant share one transaction.

Heartbeats are the registry's hot path (every agent instance, every few
seconds) and each is tiny; a transaction per request costs far more than its
one statement. A heartbeat request hands its beat to the batcher and awaits
its own answer; while a transaction for the tenant is in flight, later beats
queue, and the next transaction takes all of them. Nothing waits on a timer:
an idle registry writes a lone heartbeat at once, a busy one writes dozens
per statement.

Each transaction acts for one tenant (row-level security is in force as for a
request), and is the commit boundary of the beats in it, as the request
session is for other routes: a beat is acknowledged only after its
transaction committed, and events it causes (``agent.registered`` for a
revived agent) go through the outbox in that transaction.
"""

from __future__ import annotations

import asyncio

from disco_common.registry import HeartbeatAck
from disco_registry.agents.service import Beat, heartbeat_batch
from disco_service import ServiceSettings, ServiceState

__all__ = ["HeartbeatBatcher"]


class HeartbeatBatcher:
    """Writes heartbeats in per-tenant batches (see the module docstring).

    Args:
        state: the running service's state (its database is used per batch).
        max_batch: the most beats one transaction writes.
    """

    def __init__(self, state: ServiceState[ServiceSettings], *, max_batch: int = 500) -> None:
        self._state = state
        self._max_batch = max_batch
        self._queues: dict[str, list[tuple[Beat, asyncio.Future[HeartbeatAck | None]]]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    async def beat(self, tenant_id: str, beat: Beat) -> HeartbeatAck | None:
        """Write ``beat`` for ``tenant_id``; its ack once committed, or None (unknown agent).

        Raises:
            Exception: whatever the batch's transaction raised (database down...).
        """
        future: asyncio.Future[HeartbeatAck | None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(tenant_id, []).append((beat, future))
        if tenant_id not in self._writers:
            self._writers[tenant_id] = asyncio.create_task(
                self._write_queued(tenant_id), name=f"registry-heartbeats-{tenant_id}"
            )
        return await future

    async def _write_queued(self, tenant_id: str) -> None:
        try:
            while True:
                queue = self._queues.get(tenant_id)
                if not queue:
                    return
                batch = queue[: self._max_batch]
                del queue[: self._max_batch]
                waiting = [(beat, future) for beat, future in batch if not future.done()]
                if not waiting:
                    continue
                try:
                    acks = await self._write(tenant_id, [beat for beat, _ in waiting])
                except Exception as exc:
                    for _, future in waiting:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), ack in zip(waiting, acks, strict=True):
                    if not future.done():
                        future.set_result(ack)
        finally:
            # No await between the empty check above and here: a beat queued in
            # between would have found this writer still registered.
            del self._writers[tenant_id]
            if not self._queues.get(tenant_id):
                self._queues.pop(tenant_id, None)

    async def _write(self, tenant_id: str, beats: list[Beat]) -> list[HeartbeatAck | None]:
        database = self._state.require_database()
        async with database.unit_of_work(tenant_id) as session:
            return await heartbeat_batch(session, tenant_id=tenant_id, beats=beats)
