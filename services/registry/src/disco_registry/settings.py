"""The registry service's settings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from disco_common.registry import AGENT_TTL_MAX_SECONDS, AGENT_TTL_MIN_SECONDS
from disco_service import GatewayLinkSettings

__all__ = ["RegistrySettings"]


class RegistrySettings(GatewayLinkSettings):
    """Settings of the registry service: the shared ``DISCO_*`` ones, and its own.

    Its own variables carry ``REGISTRY`` in their name (``DISCO_REGISTRY_*``) so
    that one environment can configure the whole stack without collisions. The
    gateway's public URL and public agents (:class:`~disco_service.GatewayLinkSettings`)
    decide what the agent cards it builds say.
    """

    service_name: ClassVar[str] = "registry"

    port: int = Field(
        default=8081,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_REGISTRY_PORT"),
        description="HTTP port (DISCO_REGISTRY_PORT).",
    )
    default_ttl_seconds: int = Field(
        default=30,
        ge=AGENT_TTL_MIN_SECONDS,
        le=AGENT_TTL_MAX_SECONDS,
        validation_alias=AliasChoices("DISCO_REGISTRY_DEFAULT_TTL_SECONDS"),
        description="TTL of a registration that names none (DISCO_REGISTRY_DEFAULT_TTL_SECONDS).",
    )
    sweep_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        validation_alias=AliasChoices("DISCO_REGISTRY_SWEEP_INTERVAL_SECONDS"),
        description="How often the TTL sweeper looks for expired agents.",
    )
    sweep_batch_size: int = Field(
        default=500,
        ge=1,
        le=100_000,
        validation_alias=AliasChoices("DISCO_REGISTRY_SWEEP_BATCH_SIZE"),
        description="Instances expired per sweeper transaction.",
    )
    expired_retention_seconds: int = Field(
        default=7 * 86_400,
        ge=60,
        validation_alias=AliasChoices("DISCO_REGISTRY_EXPIRED_RETENTION_SECONDS"),
        description=(
            "How long an expired agent stays listed (include_expired) before it and the "
            "events it owns are purged."
        ),
    )
    discovery_cache_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=0,
        validation_alias=AliasChoices("DISCO_REGISTRY_DISCOVERY_CACHE_BYTES"),
        description=(
            "Size of the discovery answers each instance keeps until a write or an expiry "
            "changes them, in characters of JSON (0: none kept, every discovery asks the "
            "database)."
        ),
    )
    discovery_cache_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        validation_alias=AliasChoices("DISCO_REGISTRY_DISCOVERY_CACHE_SECONDS"),
        description=(
            "The longest a kept discovery answer is served (0: none kept); writes and "
            "expiries drop answers sooner."
        ),
    )
    asyncapi_servers: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        validation_alias=AliasChoices("DISCO_REGISTRY_ASYNCAPI_SERVERS"),
        description=(
            "The Kafka bootstrap servers the AsyncAPI document names, comma-separated "
            "host:port (default: DISCO_KAFKA_BOOTSTRAP, what the registry itself uses): "
            "set it when clients reach the brokers at other addresses."
        ),
    )
    asyncapi_cache_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        validation_alias=AliasChoices("DISCO_REGISTRY_ASYNCAPI_CACHE_BYTES"),
        description=(
            "Size of the AsyncAPI documents each instance keeps until a registration, a schema "
            "version or an expiry changes them (0: each request builds its document)."
        ),
    )
    asyncapi_cache_seconds: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        validation_alias=AliasChoices("DISCO_REGISTRY_ASYNCAPI_CACHE_SECONDS"),
        description="The longest a kept AsyncAPI document is served (0: none kept).",
    )

    @property
    def asyncapi_bootstrap(self) -> str:
        """The bootstrap servers the AsyncAPI document names."""
        return self.asyncapi_servers or self.kafka_bootstrap
