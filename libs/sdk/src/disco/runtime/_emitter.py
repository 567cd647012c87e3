"""What every part of one run shares: the emitter that stamps its events, and its clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

import structlog

from disco.runtime._events import EventSink, RuntimeEvent
from disco.runtime._state import AgentState

__all__ = ["Clock", "Emitter"]

_log = structlog.get_logger("disco.runtime")


class Clock:
    """The run's clock: laps for running time, readings for durations.

    Args:
        now: the time source, read on every lap and reading (the runner's, which
            tests replace).
    """

    __slots__ = ("_mark", "_now")

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._mark = now()

    def lap(self) -> float:
        now = self._now()
        elapsed, self._mark = now - self._mark, now
        return elapsed

    def now(self) -> float:
        """The time source's reading, without starting a new lap."""
        return self._now()


class _Ids(TypedDict):
    session_id: str
    execution_id: str
    agent_id: str


class Emitter:
    """The run's events, stamped with the state's ids."""

    __slots__ = ("agent_id", "execution_id", "session_id", "sink")

    def __init__(self, sink: EventSink, state: AgentState) -> None:
        self.sink = sink
        self.session_id = state.session_id
        self.execution_id = state.execution_id
        self.agent_id = state.agent_id

    def ids(self) -> _Ids:
        return {
            "session_id": self.session_id,
            "execution_id": self.execution_id,
            "agent_id": self.agent_id,
        }

    async def emit(self, event: RuntimeEvent) -> None:
        try:
            await self.sink.emit(event)
        except Exception as exc:  # events are telemetry: never break the loop
            _log.warning("an event sink failed", kind=type(event).__name__, error=repr(exc))

    async def flush(self) -> None:
        try:
            await self.sink.flush()
        except Exception as exc:
            _log.warning("an event sink failed to flush", error=repr(exc))
