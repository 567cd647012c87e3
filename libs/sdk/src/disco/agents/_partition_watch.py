"""Saying so when an agent's consumer has had no partition for too long.

A consumer that joined its group but was given no partition consumes nothing:
the group may have more members than the topics have partitions (the extra
instance is idle, and that is fine), or the group is stuck (a broker or client
fault; then nothing this instance can do consumes again). Either way a person
should see it. Past ``DISCO_BUS_NO_PARTITIONS_WARNING_SECONDS`` the agent logs a
warning (again every bound while it lasts), its ``/readyz`` answers 503, and its
registration says since when (metadata ``disco.no_partitions_since``, which
``disco status`` shows); once partitions come, it logs that and clears the mark.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

from disco.agents._ports import Registrar
from disco.bus._probes import add_readiness_check, remove_readiness_check
from disco_common.registry import NO_PARTITIONS_METADATA

__all__ = ["PartitionWatch"]

_log = structlog.get_logger("disco.agents")


class Assignable(Protocol):
    """What the watch reads of a consumer (:class:`~disco.bus.BusConsumer`)."""

    @property
    def unassigned_seconds(self) -> float | None: ...


class PartitionWatch:
    """Watches one agent instance's consumer for a lack of partitions (see the module docs).

    Args:
        name: the agent's name (its group).
        agent_id: the instance's registration id (names its readiness check).
        consumer: the consumer to watch.
        bound: seconds without a partition after which it says so.
        registrar: the instance's registrar (None: not registered).
    """

    def __init__(
        self,
        name: str,
        agent_id: str,
        consumer: Assignable,
        *,
        bound: float,
        registrar: Registrar | None,
    ) -> None:
        self.name = name
        self.agent_id = agent_id
        self.consumer = consumer
        self.bound = bound
        self.registrar = registrar
        self._task: asyncio.Task[None] | None = None
        self._flagged_at: float | None = None

    def start(self) -> None:
        """Add the ``/readyz`` check and start watching (idempotent)."""
        add_readiness_check(self.agent_id, self.check)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"disco-partitions-{self.name}")

    async def stop(self) -> None:
        """Stop watching and remove the check (idempotent)."""
        remove_readiness_check(self.agent_id)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def check(self) -> tuple[bool, dict[str, Any]]:
        """Ready unless the consumer has had no partition for ``bound`` seconds or more."""
        seconds = self.consumer.unassigned_seconds
        if seconds is None:
            return True, {"agent": self.name, "partitions": "assigned"}
        details = {"agent": self.name, "partitions": "none", "for_seconds": round(seconds, 1)}
        return seconds < self.bound, details

    async def _run(self) -> None:
        interval = max(0.05, min(5.0, self.bound / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                await self._look()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the watch never takes the agent down
                _log.warning("partition watch failed", agent=self.name, error=repr(exc))

    async def _look(self) -> None:
        seconds = self.consumer.unassigned_seconds
        if seconds is not None and seconds >= self.bound:
            first = self._flagged_at is None
            if first or seconds - (self._flagged_at or 0.0) >= self.bound:
                self._flagged_at = seconds
                _log.warning(
                    "this instance has had no partition: it consumes nothing (more instances "
                    "than partitions, or a stuck consumer group; see /readyz and disco status)",
                    agent=self.name,
                    agent_id=self.agent_id,
                    seconds=round(seconds, 1),
                    bound_seconds=self.bound,
                )
            if first and self.registrar is not None:
                since = datetime.now(UTC) - timedelta(seconds=seconds)
                await self.registrar.update_metadata(
                    **{NO_PARTITIONS_METADATA: since.isoformat(timespec="seconds")}
                )
        elif seconds is None and self._flagged_at is not None:
            self._flagged_at = None
            _log.info("partitions assigned again", agent=self.name, agent_id=self.agent_id)
            if self.registrar is not None:
                await self.registrar.update_metadata(**{NO_PARTITIONS_METADATA: None})
