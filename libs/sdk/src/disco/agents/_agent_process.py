"""Running an agent as a process: wait for the broker at start, stop within a bound.

:meth:`~disco.agents.Agent.run` starts through :func:`start_when_reachable`;
:func:`disco.serve` (and :meth:`~disco.agents.Agent.serve`) is :func:`serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Protocol, TypeVar

import structlog

from disco._debug import DEBUG_HINT, debug_enabled, describe
from disco.bus import BusUnavailableError
from disco.settings import BusSettings

__all__ = ["ServedAgent", "serve", "start_when_reachable", "stop_within"]

_log = structlog.get_logger("disco.agents")

_FIRST_RECONNECT_DELAY = 0.5

_stopping: set[asyncio.Task[None]] = set()
"""Stops under way (a task is kept referenced until it ends)."""


class ServedAgent(Protocol):
    """What running an agent as a process uses of it (:class:`~disco.agents.Agent`
    satisfies it)."""

    @property
    def name(self) -> str:
        """The agent's name (logs, task names)."""
        ...

    @property
    def bus_settings(self) -> BusSettings:
        """The reconnect backoff and the shutdown bound."""
        ...

    @property
    def running(self) -> bool:
        """Whether it consumes (False: still starting, maybe waiting for the broker)."""
        ...

    async def start(self) -> None:
        """Connect and start consuming."""
        ...

    async def run(self) -> None:
        """Start and consume until stopped."""
        ...

    async def stop(self, grace: float = 10.0) -> None:
        """Finish running handlers (up to ``grace`` seconds), commit, leave."""
        ...


AgentT = TypeVar("AgentT", bound=ServedAgent)


async def start_when_reachable(agent: ServedAgent) -> None:
    """Start ``agent``, trying again with a doubling backoff while the broker is unreachable."""
    settings = agent.bus_settings
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


def serve(*agents: ServedAgent) -> None:
    """Run ``agents`` in this process until SIGINT or SIGTERM, then stop them all.

    The entry point of an agent script: ``disco.serve(planner, desk)`` (one agent
    alone: ``agent.serve()``). Each agent waits for the broker at start
    (:meth:`~disco.agents.Agent.run`). A signal stops every agent within the
    largest ``bus_shutdown_timeout_seconds`` (default 10 s) whatever the
    broker's state: running handlers get half of it, steps waiting for an
    unanswering broker are cut short, and a stop still running at the bound is
    abandoned (exit status 1). More signals during the stop (a terminal's Ctrl-C
    comes twice through ``uv run``) change nothing: the stop runs to its end,
    and the process exits quietly with status 0 (once a signal came, SIGINT and
    SIGTERM stay ignored after ``serve`` returns: the process is on its way out).

    An agent that stops on its own stops the others too. When it stopped on an
    error, the error is printed as one line and the process exits with status 1
    (``DISCO_DEBUG=1`` raises it instead, with its traceback).

    Raises:
        ValueError: no agent was given.
    """
    if not agents:
        raise ValueError("disco.serve() needs at least one agent")
    try:
        failure = asyncio.run(_serve(agents))
    except KeyboardInterrupt:
        return  # a Ctrl-C before the agents' own handlers were in place: nothing ran yet
    if failure is None:
        return
    agent, error = failure
    if debug_enabled():
        raise error
    print(f"error: agent {agent.name!r} stopped: {describe(error)} {DEBUG_HINT}", file=sys.stderr)
    raise SystemExit(1)


async def _serve(agents: Sequence[AgentT]) -> tuple[AgentT, BaseException] | None:
    """Run until a signal or an agent's end; the first agent that failed, with its error."""
    bound = max(agent.bus_settings.bus_shutdown_timeout_seconds for agent in agents)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    runners = {
        asyncio.create_task(agent.run(), name=f"disco-run-{agent.name}"): agent for agent in agents
    }
    waiter = asyncio.create_task(stopping.wait())
    await asyncio.wait({*runners, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if stopping.is_set():
        _ignore_further_signals(loop)
    failure = _first_failure(runners)
    running = [(agent, runner) for runner, agent in runners.items() if not runner.done()]
    stopped = await asyncio.gather(
        *(stop_within(agent, runner, bound) for agent, runner in running)
    )
    if not all(stopped):
        # Tasks stuck on a broker that does not answer must not hold the
        # process (asyncio.run would wait for them on the way out).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return failure or _first_failure(runners)


def _ignore_further_signals(loop: asyncio.AbstractEventLoop) -> None:
    """From the first signal on, later ones change nothing, until the process ends.

    A terminal's Ctrl-C often comes twice (``uv run`` forwards it to its child,
    which has it from the terminal too). Leaving the loop's handlers in place is
    not enough: closing the loop gives SIGINT back to Python's default handler,
    and a second Ctrl-C landing after that (while the process exits) was a
    ``KeyboardInterrupt`` and exit status 130.
    """
    signals = {signal.SIGINT, signal.SIGTERM}
    # Held back while the handlers change hands: one arriving meanwhile is ignored after.
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, ValueError):
                loop.remove_signal_handler(sig)
                signal.signal(sig, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


def _first_failure(
    runners: dict[asyncio.Task[None], AgentT],
) -> tuple[AgentT, BaseException] | None:
    for runner, agent in runners.items():
        if runner.done() and not runner.cancelled() and runner.exception() is not None:
            error = runner.exception()
            assert error is not None
            return agent, error
    return None


async def stop_within(agent: ServedAgent, runner: asyncio.Task[None], bound: float) -> bool:
    """Stop ``runner`` (``agent``'s :meth:`~disco.agents.Agent.run`) within ``bound`` seconds.

    Returns:
        Whether it stopped in time.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    if not agent.running:
        runner.cancel()  # still starting (maybe waiting for the broker)
    else:
        stopping = loop.create_task(agent.stop(grace=bound / 2), name=f"disco-stop-{agent.name}")
        _stopping.add(stopping)
        stopping.add_done_callback(_stopping.discard)
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
