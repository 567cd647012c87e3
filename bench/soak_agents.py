"""The agents of the soak (``bench/soak.py``), one process per role:

    python bench/soak_agents.py ROLE [--standby]

Prints ``ready`` once every agent of the role consumes; with ``--standby`` it builds
its agents and waits for a line on stdin before it starts them (a replacement for a
process the soak kills, its imports done). Every effect outside disco is a line
``<request> <effect>`` in the role's journal (``DISCO_SOAK_JOURNAL_DIR``), appended
by a journaled step (``disco.step``), so the soak can count effects applied twice.

- ``tools``: ``soak-tool``, a Tool (durable dedup) whose effect is a step;
- ``fanout``: ``soak-fanout``, a Worker fanning out to three ``soak-part`` calls (a Tool
  in the same process, a step each) and back in;
- ``planner``: the travel planner of ``examples/travel_planner.py`` (a plan that asks a
  person whether to go by boat, and its tools);
- ``assistant``: ``soak-assistant``, an LLM agent on a Worker (scripted model, a tool
  whose effect is a step), whose sessions websocket watchers follow.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from pydantic import BaseModel

import disco
from disco import Agent, ResultContext, TaskContext, Tool, Worker

JOURNAL_ENV = "DISCO_SOAK_JOURNAL_DIR"
ROOT = Path(__file__).resolve().parents[1]


class Numbered(BaseModel):
    n: int


class Journal:
    """Appends ``<request> <effect>`` lines to ``<role>.journal`` (one write each)."""

    def __init__(self, role: str) -> None:
        folder = Path(os.environ[JOURNAL_ENV])
        self._fd = os.open(folder / f"{role}.journal", os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def effect(self, request: str, what: str) -> None:
        os.write(self._fd, f"{request} {what}\n".encode())


def _request_id() -> str:
    return disco.current_envelope().id


def tools() -> list[Agent]:
    journal = Journal("tools")
    tool = Tool("soak-tool", description="The soak's tool: one step each.", durable_dedup=True)

    @tool.on_invoke("soak.tool.requested")
    async def apply(request: Numbered) -> dict[str, int]:
        """Applies the request's effect once."""
        request_id = _request_id()
        await disco.step("apply", lambda: journal.effect(request_id, "apply"))
        return {"n": request.n}

    return [tool]


def fanout() -> list[Agent]:
    journal = Journal("fanout")
    part = Tool("soak-part", description="One part of a fan-out.", durable_dedup=True)

    @part.on_invoke("soak.part.requested")
    async def apply_part(request: Numbered) -> dict[str, int]:
        """Applies one part's effect once."""
        request_id = _request_id()
        await disco.step("apply", lambda: journal.effect(request_id, "part"))
        return {"n": request.n}

    worker = Worker("soak-fanout", description="Fans out to three parts and back in.")

    @worker.on_task("soak.fanout.requested")
    async def start(task: TaskContext[Numbered]) -> None:
        n = task.input.n
        await task.delegate_parallel(
            [
                disco.DelegationSpec(
                    event_type="soak.part.requested",
                    data={"n": n * 10 + i},
                    response_event="soak.part.done",
                )
                for i in range(3)
            ]
        )

    @worker.on_result("soak.part.done")
    async def gather(result: ResultContext) -> None:
        task = await result.restore_task()
        parts = task.aggregate_parallel_results(task.parallel_groups[0])
        if parts is None:
            return  # still waiting for the others
        await task.complete({"parts": len(parts)})

    return [worker, part]


def planner() -> list[Agent]:
    sys.path.insert(0, str(ROOT / "examples"))
    import travel_planner

    agents: list[Agent] = travel_planner.AGENTS
    return agents


def assistant() -> list[Agent]:
    from disco.runtime import (
        AgentRunner,
        ScriptedDriver,
        ScriptedReply,
        ScriptedRequest,
        StepsLimit,
        agent_tool,
    )

    journal = Journal("assistant")

    @agent_tool
    async def lookup(city: str) -> str:
        """The weather in a city."""
        request_id = _request_id()
        await disco.step("lookup", lambda: journal.effect(request_id, f"lookup {city}"))
        return f"{city}: sunny"

    def script(request: ScriptedRequest) -> ScriptedReply:
        if request.tool_results():
            return ScriptedReply(text=f"done: {request.tool_results()[-1].content}")
        found = re.search(r"in ([A-Z][a-z]+)", request.last_user_text())
        return ScriptedReply(tool_calls=[("lookup", {"city": found.group(1) if found else "Oslo"})])

    runner = AgentRunner(
        "soak-assistant",
        driver=ScriptedDriver(responder=script),
        tools=[lookup],
        criteria=[StepsLimit(4)],
    )
    worker = Worker("soak-assistant", description="The soak's LLM agent.")
    runner.attach_worker(worker, "soak-assistant.requested")
    return [worker]


ROLES = {"tools": tools, "fanout": fanout, "planner": planner, "assistant": assistant}


async def main(role: str, *, standby: bool) -> None:
    from tests.e2e.fleet import serve  # the e2e tests' agent processes run the same way

    await serve(ROLES[role](), standby=standby)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], standby="--standby" in sys.argv[2:]))
