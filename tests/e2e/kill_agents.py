"""The agents of the kill -9 campaign (:mod:`tests.e2e.test_kill_campaign`), one role each.

Every handler applies one effect outside disco per request: a line ``effect <n>``
appended to a journal file (``DISCO_KILL_JOURNAL``, one per role), flushed before
it goes on, so a SIGKILL loses nothing written. Handlers that journal their
effect in a step (``disco.step``) write ``recorded <n>`` once the step returned,
that is once its result is in the memory service: an effect with no ``recorded``
line when its process was killed is the one window a step has, and the only one
that may run again.

- ``kill-tool-steps``: a Tool (durable dedup) whose effect is a step;
- ``kill-worker-steps``: a Worker whose effect is a step;
- ``kill-runtime-steps``: an LLM agent on a Worker whose tool's effect is a step;
- ``kill-tool-plain`` and ``kill-tool-plain-local``: a Tool applying the effect with no
  step, with durable dedup and with the in-process dedup only (the figures beside).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import disco
from disco import Agent, TaskContext, Tool, Worker

JOURNAL_ENV = "DISCO_KILL_JOURNAL"
WORK_SECONDS = 0.02
"""Each handler works this long before and after its effect (so kills land in handlers)."""


class Journal:
    """Appends lines to the role's journal file (one ``write`` each, flushed)."""

    def __init__(self) -> None:
        self._fd = os.open(os.environ[JOURNAL_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, line: str) -> None:
        os.write(self._fd, f"{line}\n".encode())


def _number(data: Any) -> int:
    return int(data["n"])


def tool_steps() -> list[Agent]:
    journal = Journal()
    tool = Tool("e2e-kill-tool-steps", register=False, validate_requests=False, durable_dedup=True)

    @tool.on_invoke("e2e.kill.tool-steps.requested")
    async def apply(request: Any) -> dict[str, int]:
        n = _number(request.data)
        await asyncio.sleep(WORK_SECONDS)
        await disco.step("apply", lambda: journal.write(f"effect {n}"))
        journal.write(f"recorded {n}")
        await asyncio.sleep(WORK_SECONDS)
        return {"n": n}

    return [tool]


def worker_steps() -> list[Agent]:
    journal = Journal()
    worker = Worker("e2e-kill-worker-steps", register=False, validate_requests=False)

    @worker.on_task("e2e.kill.worker-steps.requested")
    async def apply(task: TaskContext[Any]) -> None:
        n = _number(task.data)
        await asyncio.sleep(WORK_SECONDS)
        await disco.step("apply", lambda: journal.write(f"effect {n}"))
        journal.write(f"recorded {n}")
        await asyncio.sleep(WORK_SECONDS)
        await task.complete({"n": n})

    return [worker]


def runtime_steps() -> list[Agent]:
    from disco.runtime import (
        AgentRunner,
        ScriptedDriver,
        ScriptedReply,
        ScriptedRequest,
        StepsLimit,
        agent_tool,
    )

    journal = Journal()

    @agent_tool
    async def apply(n: int) -> str:
        """Apply the effect of request n."""
        await asyncio.sleep(WORK_SECONDS)
        await disco.step("apply", lambda: journal.write(f"effect {n}"))
        journal.write(f"recorded {n}")
        return f"applied {n}"

    def script(request: ScriptedRequest) -> ScriptedReply:
        if request.tool_results():
            return ScriptedReply(text=f"done {request.tool_results()[-1].content}")
        found = re.search(r"\d+", request.last_user_text())
        return ScriptedReply(tool_calls=[("apply", {"n": int(found.group(0)) if found else 0})])

    runner = AgentRunner(
        "e2e-kill-runtime-steps",
        driver=ScriptedDriver(responder=script),
        tools=[apply],
        criteria=[StepsLimit(4)],
    )
    worker = Worker("e2e-kill-runtime-steps", register=False, validate_requests=False)
    runner.attach_worker(worker, "e2e.kill.runtime-steps.requested")
    return [worker]


def _plain(name: str, *, durable: bool) -> list[Agent]:
    journal = Journal()
    tool = Tool(name, register=False, validate_requests=False, durable_dedup=durable)

    @tool.on_invoke(f"e2e.kill.{name.removeprefix('e2e-kill-')}.requested")
    async def apply(request: Any) -> dict[str, int]:
        n = _number(request.data)
        await asyncio.sleep(WORK_SECONDS)
        journal.write(f"effect {n}")
        await asyncio.sleep(WORK_SECONDS)
        return {"n": n}

    return [tool]


def tool_plain() -> list[Agent]:
    return _plain("e2e-kill-tool-plain", durable=True)


def tool_plain_local() -> list[Agent]:
    return _plain("e2e-kill-tool-plain-local", durable=False)


KILL_ROLES = {
    "kill-tool-steps": tool_steps,
    "kill-worker-steps": worker_steps,
    "kill-runtime-steps": runtime_steps,
    "kill-tool-plain": tool_plain,
    "kill-tool-plain-local": tool_plain_local,
}
