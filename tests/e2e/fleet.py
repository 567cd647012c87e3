"""Run the agents of one role in this process: ``python -m tests.e2e.fleet ROLE``.

Settings come from ``DISCO_*`` variables. Prints ``ready`` once every agent
consumes (so the test knows when to go on), then runs until SIGTERM/SIGINT.
With ``--standby`` it imports and builds its agents, then waits for a line on
stdin before it starts them: a test that kills a process and replaces it has
the replacement waiting, its imports done, instead of starting one.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence

from disco import Agent


async def serve(agents: Sequence[Agent], *, standby: bool = False) -> None:
    """Start ``agents`` side by side (after a line on stdin, on standby), print ``ready`` once
    each consumes, and run until SIGTERM/SIGINT (the soak's agent processes run this too)."""
    if standby:
        await asyncio.to_thread(sys.stdin.readline)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    # Side by side: each start joins its agent's group, about a second each here.
    await asyncio.gather(*(agent.start() for agent in agents))
    await asyncio.gather(*(agent.wait_ready(60) for agent in agents))
    print("ready", flush=True)
    await stopping.wait()
    await asyncio.gather(*(agent.stop(grace=5) for agent in agents))


async def main(role: str, *, standby: bool = False) -> None:
    from tests.e2e.agents import ROLES

    await serve(ROLES[role](), standby=standby)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], standby="--standby" in sys.argv[2:]))
