"""FastAPI dependencies shared by the registry's routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from disco_common.ids import Id
from disco_registry.liveness.batcher import HeartbeatBatcher
from disco_registry.settings import RegistrySettings
from disco_registry.state import RegistryState

__all__ = [
    "AgentIdPath",
    "EngineDep",
    "HeartbeatsDep",
    "SettingsDep",
    "get_engine",
    "get_heartbeats",
    "get_registry_settings",
]


async def get_registry_settings(request: Request) -> RegistrySettings:
    """The running registry's settings."""
    return RegistryState.of(request).settings


SettingsDep = Annotated[RegistrySettings, Depends(get_registry_settings)]
"""The registry's settings."""

AgentIdPath = Annotated[Id, Path(description="The agent's registration id.")]
"""An ``agent_id`` path parameter."""


async def get_heartbeats(request: Request) -> HeartbeatBatcher:
    """The app's heartbeat batcher (made by :func:`disco_registry.create_app`)."""
    return RegistryState.of(request).heartbeats


HeartbeatsDep = Annotated[HeartbeatBatcher, Depends(get_heartbeats)]
"""The heartbeat batcher."""


async def get_engine(request: Request) -> AsyncEngine:
    """The running registry's database engine, for reads that are one statement each
    (no unit of work: no BEGIN, no COMMIT)."""
    return RegistryState.of(request).require_database().engine


EngineDep = Annotated[AsyncEngine, Depends(get_engine)]
"""The database engine (reads that scope their own statement to the caller)."""
