"""An LLM agent on disco: a travel assistant with two tools, one of which needs approval.

    uv run python examples/assistant.py
    uv run disco ask assistant.requested '{"text": "What is the weather in Atlantis?"}'
    uv run disco ask assistant.requested \
        '{"text": "Book a trip to Lisbon on 2026-05-01"}' --wait 600
    uv run disco answer yes          # approve the booking (or: no)

It answers ``assistant.requested`` tasks ``{"text": ...}`` with ``{"text": <final
answer>}``, keeps each session's conversation in the memory service (kill it,
start it again: the session goes on), publishes ``task.progress`` while it works
and the UI events (``agent.*``, ``TOOL_*``) on ``notification-events``.

The model is a scripted one unless ``DISCO_LLM_BASE_URL`` / ``DISCO_LLM_MODEL``
(and ``DISCO_LLM_API_KEY``) name an OpenAI-compatible server.
"""

from __future__ import annotations

import json
import re

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
    TokenBudget,
    agent_tool,
)

WEATHER = {"atlantis": "stormy, 18°C, waves of 6 m", "lisbon": "sunny, 24°C"}


@agent_tool
def lookup_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: {WEATHER.get(city.lower(), 'mild, 20°C')}"


@agent_tool(approval="always")
def book_trip(city: str, date: str) -> dict[str, str]:
    """Book a trip to a city on a date (YYYY-MM-DD); a person approves it first."""
    return {"reference": f"TRIP-{city[:3].upper()}-{date}", "city": city, "date": date}


SYSTEM_PROMPT = (
    "You are a travel assistant. Use lookup_weather for the weather and book_trip to book; "
    "answer in one or two sentences."
)


def scripted_model(request: ScriptedRequest) -> ScriptedReply:
    """What the scripted model says: a tool call for a question, then an answer from the result."""
    results = request.tool_results()
    if results:
        return ScriptedReply(text=_answer_from(results[-1].name, results[-1].content))
    text = request.last_user_text()
    city = re.search(r"\b(?:in|to)\s+([A-Z][\w-]*)", text)
    if "weather" in text.lower() and city:
        return ScriptedReply(tool_calls=[("lookup_weather", {"city": city.group(1)})])
    date = re.search(r"\d{4}-\d{2}-\d{2}", text)
    if re.search(r"\b(book|trip)\b", text.lower()) and city:
        when = date.group(0) if date else "2026-06-01"
        return ScriptedReply(tool_calls=[("book_trip", {"city": city.group(1), "date": when})])
    return ScriptedReply(text="I can tell you the weather in a city, or book you a trip.")


def _answer_from(tool: str | None, result: str) -> str:
    """What the scripted model says of a tool's result (a real model phrases it itself)."""
    if tool == "book_trip":
        try:
            booking = json.loads(result)
        except json.JSONDecodeError:  # not a booking: the call was denied, or failed
            return f"I did not book the trip. {result}"
        return (
            f"Booked: your trip to {booking['city']} on {booking['date']}, "
            f"reference {booking['reference']}."
        )
    return f"Here you are: {result}"


def driver() -> ChatDriver:
    return OpenAIChatDriver.from_env() or ScriptedDriver(responder=scripted_model)


runner = AgentRunner(
    "assistant",
    driver=driver(),
    system_prompt=SYSTEM_PROMPT,
    tools=[lookup_weather, book_trip],
    criteria=[StepsLimit(8), TokenBudget(50_000), TimeLimit(120), ErrorLimit(3)],
    description="A travel assistant: the weather anywhere, and trips booked with your approval.",
)
worker = Worker("assistant", description=runner.description)
runner.attach_worker(worker, "assistant.requested")
AGENTS = [worker]

if __name__ == "__main__":
    worker.serve()
