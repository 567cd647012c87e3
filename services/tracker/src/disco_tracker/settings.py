"""The tracker service's settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from disco_service import ServiceSettings

__all__ = ["TrackerSettings"]


class TrackerSettings(ServiceSettings):
    """Settings of the tracker service: the shared ``DISCO_*`` ones, and its port."""

    service_name: ClassVar[str] = "tracker"

    port: int = Field(
        default=8083,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_TRACKER_PORT"),
        description="HTTP port (DISCO_TRACKER_PORT).",
    )
    hitl_sweep_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        description="How often unanswered questions past their deadline are timed out.",
    )
    hitl_consumer_group: str = Field(
        default="disco-tracker",
        pattern=r"^[A-Za-z0-9._-]{1,100}$",
        description="Consumer group of the tracker's instances on notification-events.",
    )
