"""FastAPI dependencies shared by the registry's routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from disco_common.ids import Id
from disco_registry.liveness.batcher import HeartbeatBatcher
from disco_registry.settings import RegistrySettings
from disco_service import get_state

__all__ = [
    "AgentIdPath",
    "HeartbeatsDep",
    "SettingsDep",
    "get_heartbeats",
    "get_registry_settings",
]


async def get_registry_settings(request: Request) -> RegistrySettings:
    """The running registry's settings."""
    settings = get_state(request).settings
    if not isinstance(settings, RegistrySettings):  # pragma: no cover - wiring mistake
        raise TypeError("the registry app must be built with RegistrySettings")
    return settings


SettingsDep = Annotated[RegistrySettings, Depends(get_registry_settings)]
"""The registry's settings."""

AgentIdPath = Annotated[Id, Path(description="The agent's registration id.")]
"""An ``agent_id`` path parameter."""


async def get_heartbeats(request: Request) -> HeartbeatBatcher:
    """The app's heartbeat batcher (made by :func:`disco_registry.create_app`)."""
    batcher = getattr(request.app.state, "heartbeats", None)
    if not isinstance(batcher, HeartbeatBatcher):  # pragma: no cover - wiring mistake
        raise TypeError("the registry app has no heartbeat batcher: build it with create_app")
    return batcher


HeartbeatsDep = Annotated[HeartbeatBatcher, Depends(get_heartbeats)]
"""The heartbeat batcher."""
