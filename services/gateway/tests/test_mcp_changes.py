"""A tool change published through the SDK's subscription bus is checked like an agent event."""

from __future__ import annotations

from typing import Any, cast

from mcp.server.subscriptions import PromptsListChanged, ToolsListChanged

from disco.settings import BusSettings
from disco_gateway.mcp.changes import ToolChanges, ViewBus


def _changes() -> ToolChanges:
    # Neither the catalog nor the directory is read until a change is applied.
    return ToolChanges(BusSettings(), cast(Any, None), cast(Any, None), cast(Any, None))


async def test_a_published_tool_change_asks_for_a_fresh_reading() -> None:
    changes = _changes()
    bus = ViewBus(changes)

    await bus.publish(PromptsListChanged())
    assert not changes._changed.is_set()  # no prompts at this door: nothing to check

    await bus.publish(ToolsListChanged())
    assert changes._changed.is_set()
