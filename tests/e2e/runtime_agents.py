"""LLM agents on the runtime for the end-to-end tests (roles of :mod:`tests.e2e.fleet`).

Each role is its own agent name (its own consumer group), so tests that stop,
kill or restart one never disturb another. The model is a scripted one:

- "weather in <City>": ``lookup_weather``, then an answer;
- "book <City> on <date>": ``book_trip`` (needs approval), then an answer;
- "slow ... in <City>": ``lookup_weather``, then ``slow_step`` (which hangs
  while ``DISCO_TEST_HANG`` is set, for a test to kill the process), then an answer.
"""

from __future__ import annotations

import asyncio
import os
import re

from disco import Agent, Worker
from disco.runtime import (
    AgentRunner,
    CompletionOptions,
    ReasoningEffort,
    ScriptedDriver,
    ScriptedReply,
    ScriptedRequest,
    StepsLimit,
    agent_tool,
    tool_log,
)

HANG_ENV = "DISCO_TEST_HANG"
OPTIONS = CompletionOptions(
    temperature=0.3, reasoning_effort=ReasoningEffort.HIGH, budget_tokens=2048
)


@agent_tool
def lookup_weather(city: str) -> str:
    """Today's weather in a city."""
    tool_log(f"looking up {city}")
    return f"{city}: sunny, 22°C"


@agent_tool(approval="always", redact=["card"])
def book_trip(city: str, date: str, card: str = "4111-1111") -> dict[str, str]:
    """Book a trip (a person approves it first)."""
    return {"reference": f"TRIP-{city[:3].upper()}-{date}", "card": card[-4:]}


@agent_tool
async def slow_step(city: str) -> str:
    """A step that takes its time (forever while DISCO_TEST_HANG is set)."""
    if os.environ.get(HANG_ENV):
        await asyncio.Event().wait()
    return f"prepared {city}"


def script(request: ScriptedRequest) -> ScriptedReply:
    text = request.last_user_text()
    done = request.tool_results()
    city_match = re.search(r"\b(?:in|to|book)\s+([A-Z][\w-]*)", text)
    city = city_match.group(1) if city_match else "Nowhere"
    if text.startswith("slow"):
        if not done:
            return ScriptedReply(tool_calls=[("lookup_weather", {"city": city})])
        if len(done) == 1:
            return ScriptedReply(tool_calls=[("slow_step", {"city": city})])
    elif not done and text.startswith("book"):
        date = re.search(r"\d{4}-\d{2}-\d{2}", text)
        arguments = {"city": city, "date": date.group(0) if date else "2026-01-01"}
        return ScriptedReply(tool_calls=[("book_trip", arguments)])
    elif not done and "weather" in text:
        return ScriptedReply(tool_calls=[("lookup_weather", {"city": city})])
    answer = done[-1].content if done else "hello"
    return ScriptedReply(text=f"done: {answer}", chunks=["done: ", answer])


def _runtime(name: str) -> list[Agent]:
    timeout = int(os.environ.get("DISCO_TEST_APPROVAL_TIMEOUT", "900"))
    runner = AgentRunner(
        name,
        driver=ScriptedDriver(responder=script),
        system_prompt="You are the e2e assistant.",
        tools=[lookup_weather, book_trip, slow_step],
        criteria=[StepsLimit(6)],
        options=OPTIONS,
        approval_timeout_seconds=timeout,
        include_continuation_trace=True,
    )
    worker = Worker(name, description="An LLM agent for the e2e tests.")
    runner.attach_worker(worker, f"{name}.requested")
    return [worker]


def runtime() -> list[Agent]:
    return _runtime("e2e-runtime")


def runtime_timeout() -> list[Agent]:
    return _runtime("e2e-runtime-timeout")


def runtime_restart() -> list[Agent]:
    return _runtime("e2e-runtime-restart")


def runtime_kill() -> list[Agent]:
    return _runtime("e2e-runtime-kill")


RUNTIME_ROLES = {
    "runtime": runtime,
    "runtime-timeout": runtime_timeout,
    "runtime-restart": runtime_restart,
    "runtime-kill": runtime_kill,
}
