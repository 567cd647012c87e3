"""FastAPI dependencies shared by the registry's routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from disco_common.ids import Id
from disco_registry.settings import RegistrySettings
from disco_service import get_state

__all__ = ["AgentIdPath", "SettingsDep", "get_registry_settings"]


def get_registry_settings(request: Request) -> RegistrySettings:
    """The running registry's settings."""
    settings = get_state(request).settings
    if not isinstance(settings, RegistrySettings):  # pragma: no cover - wiring mistake
        raise TypeError("the registry app must be built with RegistrySettings")
    return settings


SettingsDep = Annotated[RegistrySettings, Depends(get_registry_settings)]
"""The registry's settings."""

AgentIdPath = Annotated[Id, Path(description="The agent's registration id.")]
"""An ``agent_id`` path parameter."""
