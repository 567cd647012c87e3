"""The gateway service's settings."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Self

from limits import parse_many
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from disco_common.ids import Id, TenantId
from disco_gateway.cards.signing import load_retired_keys, load_signing_key
from disco_service import GatewayLinkSettings

__all__ = ["GatewaySettings"]


def _own(name: str) -> AliasChoices:
    return AliasChoices(f"DISCO_GATEWAY_{name}")


def _check_limits(text: str, what: str = "") -> None:
    if text.strip():
        try:
            parse_many(text)
        except ValueError as exc:
            raise ValueError(
                f"{what}{text!r} is not a list of rate limits such as `50/second;1000/minute`"
            ) from exc


class GatewaySettings(GatewayLinkSettings):
    """Settings of the gateway: the shared ``DISCO_*`` ones, and its own ``DISCO_GATEWAY_*``.

    The public URL and the public agents (``DISCO_GATEWAY_PUBLIC_URL``,
    ``DISCO_GATEWAY_PUBLIC_AGENTS``) are shared with the registry, which builds
    the same cards.
    """

    service_name: ClassVar[str] = "gateway"

    port: int = Field(
        default=8080,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_GATEWAY_PORT"),
        description="HTTP port (DISCO_GATEWAY_PORT).",
    )
    registry_url: str = Field(
        default="http://127.0.0.1:8081",
        min_length=1,
        validation_alias=AliasChoices("DISCO_REGISTRY_URL"),
        description="Where the registry is: agents and their schemas are read from it.",
    )
    tracker_url: str = Field(
        default="http://127.0.0.1:8083",
        min_length=1,
        validation_alias=AliasChoices("DISCO_TRACKER_URL"),
        description="Where the tracker is: the console reads plans, tasks and timelines from it.",
    )
    memory_url: str = Field(
        default="http://127.0.0.1:8082",
        min_length=1,
        validation_alias=AliasChoices("DISCO_MEMORY_URL"),
        description="Where the memory service is: the console reads sessions from it.",
    )
    console_dlq_limit: int = Field(
        default=500,
        ge=1,
        le=100_000,
        validation_alias=_own("CONSOLE_DLQ_LIMIT"),
        description="How many of the newest dead-lettered records the console reads per topic.",
    )
    public_tenant: TenantId = Field(
        default="default",
        validation_alias=_own("PUBLIC_TENANT"),
        description="The tenant calls to public agents without a token run in.",
    )
    public_user: Id = Field(
        default="anonymous",
        validation_alias=_own("PUBLIC_USER"),
        description="The user calls to public agents without a token run as.",
    )
    card_visibility: Literal["public", "all"] = Field(
        default="public",
        validation_alias=_own("CARD_VISIBILITY"),
        description=(
            "Whose cards are served without a token: `public` (agents registered with "
            "visibility public, and the public agents), or `all` the public tenant's "
            "agents (dev only)."
        ),
    )
    card_signing_key: SecretStr | None = Field(
        default=None,
        validation_alias=_own("CARD_SIGNING_KEY"),
        description=(
            "A PEM private key (EC P-256/P-384/P-521, RSA of 2048 bits or more, or Ed25519) "
            "that signs every agent card the gateway serves (JWS, the card's `signatures`); "
            "its public key is served at /.well-known/jwks.json."
        ),
    )
    card_signing_key_file: Path | None = Field(
        default=None,
        validation_alias=_own("CARD_SIGNING_KEY_FILE"),
        description="The card signing key read from this file instead (a mounted secret).",
    )
    card_retired_keys_file: Path | None = Field(
        default=None,
        validation_alias=_own("CARD_RETIRED_KEYS_FILE"),
        description=(
            "A JSON Web Key Set of public keys that signed cards before the current one, "
            "published with it in /.well-known/jwks.json while callers still hold such cards."
        ),
    )
    card_signing_key_id: str | None = Field(
        default=None,
        min_length=1,
        validation_alias=_own("CARD_SIGNING_KEY_ID"),
        description="The signing key's `kid` (default: its RFC 7638 thumbprint).",
    )
    registry_cache_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        validation_alias=_own("REGISTRY_CACHE_SECONDS"),
        description="How long an agent's registration read from the registry is reused.",
    )
    handover_seconds: float = Field(
        default=3.0,
        gt=0,
        le=300,
        validation_alias=_own("HANDOVER_SECONDS"),
        description=(
            "How old an answer is before the consumer group applies it to a task no instance "
            "applied (the instance following the task live goes first)."
        ),
    )
    interrupted_task_seconds: float = Field(
        default=300.0,
        gt=0,
        validation_alias=_own("INTERRUPTED_TASK_SECONDS"),
        description="How long a task waiting for input is kept in an instance's memory.",
    )
    task_retention_days: float = Field(
        default=30.0,
        gt=0,
        validation_alias=_own("TASK_RETENTION_DAYS"),
        description="Finished A2A tasks untouched this long are deleted.",
    )
    retention_interval_seconds: float = Field(
        default=3600.0,
        gt=0,
        validation_alias=_own("RETENTION_INTERVAL_SECONDS"),
        description="How often the retention job runs.",
    )
    push_allow_loopback: bool = Field(
        default=False,
        validation_alias=_own("PUSH_ALLOW_LOOPBACK"),
        description="Let push notifications go to loopback addresses (dev and tests only).",
    )
    push_max_attempts: int = Field(
        default=5, ge=1, le=20, validation_alias=_own("PUSH_MAX_ATTEMPTS")
    )
    push_backoff_seconds: float = Field(
        default=0.5, gt=0, le=60, validation_alias=_own("PUSH_BACKOFF_SECONDS")
    )
    push_timeout_seconds: float = Field(
        default=5.0, gt=0, le=120, validation_alias=_own("PUSH_TIMEOUT_SECONDS")
    )
    push_sweep_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        validation_alias=_own("PUSH_SWEEP_SECONDS"),
        description=(
            "How often an instance takes push notifications that are due: retries, and"
            " those a stopped instance held."
        ),
    )
    rate_limit_tenant: str = Field(
        default="",
        validation_alias=_own("RATE_LIMIT_TENANT"),
        description=(
            "Limits of one tenant's A2A calls and publishes, e.g. "
            "`200/second;5000/minute` (empty: none)."
        ),
    )
    rate_limit_per_tenant: dict[str, str] = Field(
        default_factory=dict,
        validation_alias=_own("RATE_LIMIT_PER_TENANT"),
        description=(
            "Tenants whose limits differ from RATE_LIMIT_TENANT, as JSON: "
            '`{"acme": "1000/second", "trial": "5/second;100/hour", "ops": ""}` '
            "(empty: none)."
        ),
    )
    rate_limit_anonymous: str = Field(
        default="20/second;600/minute",
        validation_alias=_own("RATE_LIMIT_ANONYMOUS"),
        description=(
            "Limits of the calls without a token (public agents) from one address (empty: none)."
        ),
    )
    rate_limit_share_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        validation_alias=_own("RATE_LIMIT_SHARE_SECONDS"),
        description=(
            "How often an instance shares its rate-limit counts with the other instances "
            "(through Postgres), so that a limit holds for all of them together; 0: each "
            "instance counts alone, and N instances let through N times a limit."
        ),
    )
    publish_max_wait_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        validation_alias=_own("PUBLISH_MAX_WAIT_SECONDS"),
        description="The longest `wait` a caller of POST /v1/publish may ask for.",
    )
    consumer_group: str = Field(
        default="disco-gateway",
        validation_alias=_own("CONSUMER_GROUP"),
        description="The consumer group the gateway's instances apply answers in.",
    )

    stream_retention_seconds: float = Field(
        default=86_400.0,
        gt=0,
        validation_alias=_own("STREAM_RETENTION_SECONDS"),
        description="How long a session's events are kept for replay (`?after=`).",
    )
    stream_max_events_per_session: int = Field(
        default=5000,
        ge=10,
        validation_alias=_own("STREAM_MAX_EVENTS_PER_SESSION"),
        description="How many of a session's most recent events are kept for replay.",
    )
    stream_retention_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        validation_alias=_own("STREAM_RETENTION_INTERVAL_SECONDS"),
        description="How often old session events are purged.",
    )
    stream_queue_size: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        validation_alias=_own("STREAM_QUEUE_SIZE"),
        description=(
            "Messages a websocket may fall behind by; past it the client gets STREAM_GAP "
            "and reconciles with the replay endpoint."
        ),
    )
    stream_heartbeat_seconds: float = Field(
        default=20.0,
        gt=0,
        le=3600,
        validation_alias=_own("STREAM_HEARTBEAT_SECONDS"),
        description=(
            "Websocket ping interval; a socket that does not answer a ping within it is closed."
        ),
    )
    stream_compression: bool = Field(
        default=False,
        validation_alias=_own("STREAM_COMPRESSION"),
        description=(
            "Whether websocket clients that offer permessage-deflate get it. Off by default: "
            "each socket compresses every message on its own (about a third of the send "
            "cost), for messages of a few hundred bytes; the messages are the same either way."
        ),
    )
    stream_payload_max_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        validation_alias=_own("STREAM_PAYLOAD_MAX_BYTES"),
        description="The largest payload a stream message carries (larger ones are cut).",
    )

    mcp_call_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        validation_alias=_own("MCP_CALL_TIMEOUT_SECONDS"),
        description=(
            "How long an MCP tools/call waits for the agent's answer; then its result names "
            "the task, which A2A, the tracker and the console follow on."
        ),
    )
    mcp_page_size: int = Field(
        default=100,
        ge=1,
        le=200,
        validation_alias=_own("MCP_PAGE_SIZE"),
        description="Tools per page of an MCP tools/list.",
    )
    mcp_state_keys: SecretStr | None = Field(
        default=None,
        validation_alias=_own("MCP_STATE_KEYS"),
        description=(
            "Comma-separated secrets (32+ characters each; the first seals) that seal what an "
            "MCP client carries between two legs of a call (a 2026-07-28 requestState, an "
            "elicitation's id); every instance needs the same. Unset: derived from "
            "DISCO_AUTH_SECRET, else one key per process (one instance only)."
        ),
    )
    mcp_session_idle_seconds: float = Field(
        default=86_400.0,
        gt=0,
        validation_alias=_own("MCP_SESSION_IDLE_SECONDS"),
        description="How long an MCP session (2025 protocol versions) lives without a request.",
    )
    mcp_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        validation_alias=_own("MCP_ALLOWED_HOSTS"),
        description=(
            "Host headers /mcp accepts besides the public URL's and loopback's, comma-separated "
            "(`mcp.example.com`, `*` for any: behind a proxy that checks Host)."
        ),
    )
    mcp_allowed_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        validation_alias=_own("MCP_ALLOWED_ORIGINS"),
        description=(
            "Origin headers /mcp accepts besides the public URL's and loopback's, comma-separated "
            "(browser clients)."
        ),
    )
    mcp_authorization_server: str | None = Field(
        default=None,
        min_length=1,
        validation_alias=_own("MCP_AUTHORIZATION_SERVER"),
        description=(
            "The OAuth authorization server MCP clients get their tokens from, as the protected "
            "resource metadata names it (default: DISCO_AUTH_ISSUER)."
        ),
    )

    @field_validator("mcp_allowed_hosts", "mcp_allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(item.strip() for item in value.split(",") if item.strip())
        return value

    @field_validator("mcp_state_keys")
    @classmethod
    def _long_state_keys(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        for key in value.get_secret_value().split(","):
            if len(key.strip().encode()) < 32:
                raise ValueError(
                    "each DISCO_GATEWAY_MCP_STATE_KEYS key needs 32+ characters of secret "
                    "randomness (`openssl rand -hex 32`)"
                )
        return value

    def mcp_state_secrets(self) -> list[str] | None:
        """The keys MCP state is sealed with (the first seals); None: none shared, one per
        process. Derived from the HS256 secret when no keys are set (its own use of it)."""
        if self.mcp_state_keys is not None:
            keys = self.mcp_state_keys.get_secret_value().split(",")
            return [key.strip() for key in keys if key.strip()]
        secret = self.hs256_secret()
        if secret is None:
            return None
        derived = hmac.new(secret.encode(), b"disco-gateway/mcp-state", hashlib.sha256)
        return [derived.hexdigest()]

    @field_validator("rate_limit_tenant", "rate_limit_anonymous")
    @classmethod
    def _rate_limits(cls, value: str) -> str:
        _check_limits(value)
        return value

    @field_validator("rate_limit_per_tenant")
    @classmethod
    def _rate_limits_per_tenant(cls, value: dict[str, str]) -> dict[str, str]:
        for tenant, limits in value.items():
            _check_limits(limits, f"the limits of tenant {tenant!r}: ")
        return value

    @field_validator(
        "card_signing_key", "card_signing_key_file", "card_retired_keys_file", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # An empty variable (a template's placeholder) means no key, not an empty one.
        return None if isinstance(value, str) and not value.strip() else value

    def card_signing_pem(self) -> bytes | None:
        """The card signing key's PEM, from the setting or its file; None when unset."""
        if self.card_signing_key is not None:
            return self.card_signing_key.get_secret_value().encode()
        if self.card_signing_key_file is not None:
            return self.card_signing_key_file.read_bytes()
        return None

    @model_validator(mode="after")
    def _one_signing_key(self) -> Self:
        if self.card_signing_key is not None and self.card_signing_key_file is not None:
            raise ValueError(
                "set DISCO_GATEWAY_CARD_SIGNING_KEY or DISCO_GATEWAY_CARD_SIGNING_KEY_FILE, "
                "not both"
            )
        if self.card_signing_key_file is not None and not self.card_signing_key_file.is_file():
            raise ValueError(
                f"DISCO_GATEWAY_CARD_SIGNING_KEY_FILE {self.card_signing_key_file} is not a file"
            )
        pem = self.card_signing_pem()
        if pem is not None:
            load_signing_key(pem)  # refused at startup, not at the first card
        if self.card_retired_keys_file is not None:
            if not self.card_retired_keys_file.is_file():
                raise ValueError(
                    f"DISCO_GATEWAY_CARD_RETIRED_KEYS_FILE {self.card_retired_keys_file} "
                    "is not a file"
                )
            load_retired_keys(self.card_retired_keys_file.read_bytes())
        return self

    @model_validator(mode="after")
    def _dev_only(self) -> Self:
        if self.env == "production":
            if self.push_allow_loopback:
                raise ValueError("DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK is for dev and tests only")
            if self.card_visibility == "all":
                raise ValueError("DISCO_GATEWAY_CARD_VISIBILITY=all is for dev only")
        return self
