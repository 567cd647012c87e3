"""Tools and runners shared by the runtime's unit tests."""

from __future__ import annotations

from typing import Any

from disco.runtime import (
    AgentRunner,
    CollectingSink,
    InMemorySnapshotStore,
    ScriptedDriver,
    ScriptedReply,
    agent_tool,
)

WEATHER = {"Oslo": "snow, -3°C", "Lisbon": "sunny, 24°C"}


@agent_tool
def lookup_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: {WEATHER.get(city, 'mild')}"


@agent_tool
async def local_time(city: str, twenty_four_hours: bool = True) -> dict[str, Any]:
    """The local time in a city."""
    return {"city": city, "time": "14:05" if twenty_four_hours else "2:05 pm"}


@agent_tool(approval="always", redact=["card"])
def book_trip(city: str, date: str, card: str = "4111") -> dict[str, str]:
    """Book a trip (needs approval)."""
    return {"reference": f"TRIP-{city[:3].upper()}", "date": date}


def call(name: str, **arguments: Any) -> ScriptedReply:
    """A scripted reply calling one tool."""
    return ScriptedReply(tool_calls=[(name, arguments)])


def runner(replies: list[Any], **options: Any) -> tuple[AgentRunner, ScriptedDriver]:
    """A runner on a scripted model, with the test tools and an in-memory snapshot store."""
    driver = ScriptedDriver(replies)
    options.setdefault("tools", [lookup_weather, local_time, book_trip])
    options.setdefault("snapshots", InMemorySnapshotStore())
    options.setdefault("system_prompt", "You help travellers.")
    return AgentRunner("assistant", driver=driver, **options), driver


def sink() -> CollectingSink:
    return CollectingSink()
