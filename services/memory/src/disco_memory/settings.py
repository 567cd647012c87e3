"""The memory service's settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from disco_service import ServiceSettings

__all__ = ["MemorySettings"]


class MemorySettings(ServiceSettings):
    """Settings of the memory service: the shared ``DISCO_*`` ones, and its port."""

    service_name: ClassVar[str] = "memory"

    port: int = Field(
        default=8082,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_MEMORY_PORT"),
        description="HTTP port (DISCO_MEMORY_PORT).",
    )
