"""Running an agent as a process: wait for the broker at start, stop within a bound.

:meth:`~disco.agents.Agent.run` starts through :func:`start_when_reachable`;
:meth:`~disco.agents.Agent.serve` is :func:`serve_until_signalled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING

import structlog

from disco.bus import BusUnavailableError

if TYPE_CHECKING:
    from disco.agents._agent import Agent

__all__ = ["serve_until_signalled", "start_when_reachable", "stop_within"]

_log = structlog.get_logger("disco.agents")

_FIRST_RECONNECT_DELAY = 0.5


async def start_when_reachable(agent: Agent) -> None:
    """Start ``agent``, trying again with a doubling backoff while the broker is unreachable."""
    settings = agent._settings_of_bus()
    delay = _FIRST_RECONNECT_DELAY
    while True:
        try:
            await agent.start()
            return
        except BusUnavailableError as exc:
            _log.warning(
                "broker unreachable; trying again",
                agent=agent.name,
                retry_in_seconds=delay,
                error=str(exc),
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, settings.bus_reconnect_backoff_max_seconds)


def serve_until_signalled(agent: Agent) -> None:
    """Run ``agent`` until SIGINT or SIGTERM, then stop it within the shutdown bound."""
    bound = agent._settings_of_bus().bus_shutdown_timeout_seconds

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stopping.set)
        runner = asyncio.create_task(agent.run())
        waiter = asyncio.create_task(stopping.wait())
        done, _ = await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if runner in done:
            await runner
        elif not await stop_within(agent, runner, bound):
            # Tasks stuck on a broker that does not answer must not hold the
            # process (asyncio.run would wait for them on the way out).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    asyncio.run(main())


async def stop_within(agent: Agent, runner: asyncio.Task[None], bound: float) -> bool:
    """Stop ``runner`` (``agent``'s :meth:`~disco.agents.Agent.run`) within ``bound`` seconds.

    Returns:
        Whether it stopped in time.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    if agent._consumer is None:
        runner.cancel()  # still starting (maybe waiting for the broker)
    else:
        agent._stopping_task = loop.create_task(
            agent.stop(grace=bound / 2), name=f"disco-stop-{agent.name}"
        )
    done, _ = await asyncio.wait({runner}, timeout=max(0.0, deadline - loop.time()))
    if runner in done:
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        return True
    _log.error(
        "stop did not finish within the bound; exiting anyway",
        agent=agent.name,
        bound_seconds=bound,
    )
    return False
