"""One shape for everything in the SDK that is started and stopped."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self

import structlog

__all__ = ["STOP_NETWORK_SECONDS", "StartStop", "stop_within"]

_log = structlog.get_logger("disco.bus")


class StartStop(ABC):
    """Something with ``start()``/``stop()``, usable as ``async with`` (stops on exit)."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


STOP_NETWORK_SECONDS = 3.0
"""How long one step of stopping may wait for the broker (a commit, leaving a group,
flushing the producer) before it is cut short: a broker that is down must not hold
a process that was told to stop."""


async def stop_within(
    stopping: Coroutine[Any, Any, None], what: str, seconds: float = STOP_NETWORK_SECONDS
) -> None:
    """Await ``stopping``, giving up (with a warning) after ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            await stopping
    except TimeoutError:
        _log.warning("stopping cut short: the broker does not answer", part=what, seconds=seconds)
