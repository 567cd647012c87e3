"""The registry service's settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from disco_service import ServiceSettings

__all__ = ["RegistrySettings"]


class RegistrySettings(ServiceSettings):
    """Settings of the registry service: the shared ``DISCO_*`` ones, and its port."""

    service_name: ClassVar[str] = "registry"

    port: int = Field(
        default=8081,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_REGISTRY_PORT"),
        description="HTTP port (DISCO_REGISTRY_PORT).",
    )
