"""An LLM agent whose tools are an MCP server's: ``examples/mcp_server.py``, over stdio.

    uv run python examples/mcp_assistant.py
    uv run disco ask concierge.requested '{"text": "What is the weather in Lisbon?"}'
    uv run disco ask concierge.requested \
        '{"text": "Book a table at Tasca at 20:00"}' --wait 600
    uv run disco answer yes          # approve the booking (or: no)

The runner starts the MCP server once (its process lives as long as this one's),
lists its tools and gives them to the model like its own: ``forecast`` is
called at once, ``book_table`` waits for a person's approval. Calls and results
go into the agent's state, steps and UI events as any tool's. Point it at any
MCP server instead: ``MCPTools.http(url, headers={...})`` or
``MCPTools.stdio(command, args)``.

The model is a scripted one unless ``DISCO_LLM_BASE_URL`` / ``DISCO_LLM_MODEL``
(and ``DISCO_LLM_API_KEY``) name an OpenAI-compatible server.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from disco import Worker
from disco.runtime import (
    AgentRunner,
    ChatDriver,
    ErrorLimit,
    OpenAIChatDriver,
    ScriptedDriver,
    ScriptedReply,
    ScriptedRequest,
    StepsLimit,
    TimeLimit,
)
from disco.runtime.mcp import MCPTools

SERVER = Path(__file__).with_name("mcp_server.py")

tools = MCPTools.stdio(
    sys.executable, [str(SERVER)], name="travel-tools", approval={"book_table": "always"}
)

SYSTEM_PROMPT = (
    "You are a concierge. Use forecast for the weather and book_table to book a table; "
    "answer in one sentence."
)


def scripted_model(request: ScriptedRequest) -> ScriptedReply:
    """A tool call for a question, then an answer from the tool's result."""
    results = request.tool_results()
    if results:
        return ScriptedReply(text=_answer_from(results[-1].name, results[-1].content))
    text = request.last_user_text()
    city = re.search(r"\bin\s+([A-Z][\w-]*)", text)
    if "weather" in text.lower() and city:
        return ScriptedReply(tool_calls=[("forecast", {"city": city.group(1)})])
    table = re.search(r"\bat\s+([A-Z][\w-]*)\s+at\s+(\d{1,2}:\d{2})", text)
    if "book" in text.lower() and table:
        arguments = {"restaurant": table.group(1), "time": table.group(2)}
        return ScriptedReply(tool_calls=[("book_table", arguments)])
    return ScriptedReply(text="I can tell you the weather, or book you a table.")


def _answer_from(tool: str | None, result: str) -> str:
    try:
        value = json.loads(result)
    except json.JSONDecodeError:  # a denied or failed call says why in words
        return f"That did not work: {result}"
    if tool == "book_table":
        return f"Booked at {value['restaurant']} at {value['time']}: {value['reference']}."
    return f"{value['city']}: {value['sky']}, {value['celsius']}°C."


def driver() -> ChatDriver:
    return OpenAIChatDriver.from_env() or ScriptedDriver(responder=scripted_model)


runner = AgentRunner(
    "concierge",
    driver=driver(),
    system_prompt=SYSTEM_PROMPT,
    tools=[tools],
    criteria=[StepsLimit(8), TimeLimit(120), ErrorLimit(3)],
    description="A concierge: the weather, and tables booked with your approval (MCP tools).",
)
worker = Worker("concierge", description=runner.description)
runner.attach_worker(worker, "concierge.requested")
AGENTS = [worker]

if __name__ == "__main__":
    worker.serve()
