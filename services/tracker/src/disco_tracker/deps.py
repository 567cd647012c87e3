"""FastAPI dependencies shared by the tracker's routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from disco_common.ids import Id
from disco_tracker.state import TrackerState

__all__ = ["PlanIdPath", "StateDep", "TaskIdPath", "get_tracker_state"]


async def get_tracker_state(request: Request) -> TrackerState:
    """The running tracker's state."""
    return TrackerState.of(request)


StateDep = Annotated[TrackerState, Depends(get_tracker_state)]
"""The tracker's state (settings, database, feed hub)."""

PlanIdPath = Annotated[Id, Path(description="The plan's id.")]
TaskIdPath = Annotated[Id, Path(description="The task's id.")]
