"""Run the agents of one role in this process: ``python -m tests.e2e.fleet ROLE``.

Settings come from ``DISCO_*`` variables. Prints ``ready`` once every agent
consumes (so the test knows when to go on), then runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from tests.e2e.agents import ROLES


async def main(role: str) -> None:
    agents = ROLES[role]()
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


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
