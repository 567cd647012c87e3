"""The gateway service's settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from disco_service import ServiceSettings

__all__ = ["GatewaySettings"]


class GatewaySettings(ServiceSettings):
    """Settings of the gateway service: the shared ``DISCO_*`` ones, and its port."""

    service_name: ClassVar[str] = "gateway"

    port: int = Field(
        default=8080,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_GATEWAY_PORT"),
        description="HTTP port (DISCO_GATEWAY_PORT).",
    )
