"""Settings of the disco SDK, read from ``DISCO_*`` environment variables: the bus's
(:class:`BusSettings`) and where the services are and who calls them
(:class:`ServiceClientSettings`, also exported by :mod:`disco.clients`).

Every setting has a default that works against the local stack (`disco dev up`
or the test harness); production sets the bootstrap servers, the prefix and the
security options.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from disco.auth import DEV_AUTH_SECRET, DevTokenMinter, StaticToken, TokenProvider
from disco_common.auth import Role
from disco_common.ids import Id, TenantId
from disco_common.topics import validate_topic_prefix

__all__ = ["BrokerKind", "BusSettings", "ServiceClientSettings", "TokenAlgorithm"]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
BrokerKind = Literal["embedded", "kafka"]
BrokerKindSetting = Literal["auto", "embedded", "kafka"]
TokenAlgorithm = Literal[
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]
"""A JWT signature algorithm (the token header's ``alg``) disco can verify."""

# Fetch waits (min, max) in ms per broker kind, when the settings leave them out.
_FETCH_WAITS: dict[str, tuple[int | None, int]] = {"embedded": (1, 100), "kafka": (None, 500)}
_COMMIT_INTERVALS: dict[str, int] = {"embedded": 0, "kafka": 100}


class BusSettings(BaseSettings):
    """How an agent or service reaches the bus (environment prefix ``DISCO_``)."""

    model_config = SettingsConfigDict(env_prefix="DISCO_", extra="ignore", frozen=True)

    env: Literal["dev", "production"] = Field(
        default="dev",
        description=(
            "`dev` allows built-in secrets and unsigned envelopes; `production` refuses them."
        ),
    )

    kafka_bootstrap: str = Field(
        default="127.0.0.1:9092",
        min_length=1,
        description="Comma-separated host:port list of Kafka brokers.",
    )
    topic_prefix: str = Field(
        default="",
        description="Put in front of every topic name so environments can share a cluster.",
    )
    kafka_client_id: str = Field(default="disco", min_length=1, max_length=200)

    # Provisioning (ensure_topics)
    kafka_partitions: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description=(
            "Partitions of each topic ensure_topics() creates. The default is the count "
            "the embedded broker (Tansu) gives a topic it creates by itself, which it does "
            "after restarting without its data: the topics then come back as they were. "
            "(With another count, Tansu keeps a group's old assignment when a member "
            "rejoins, so the extra partitions would go unread.)"
        ),
    )
    kafka_replication_factor: int = Field(default=1, ge=1, le=32)

    # Consuming
    kafka_broker_kind: BrokerKindSetting = Field(
        default="auto",
        description=(
            "What the bootstrap servers are, which sets the fetch-wait defaults: "
            "'embedded' for the Tansu broker of `disco dev up` (it does not long-poll: an "
            "empty fetch sleeps its whole wait and only re-checks storage now and then), "
            "'kafka' for Apache Kafka or another broker that answers a fetch as soon as "
            "data arrives. 'auto' asks the broker once per process (a Tansu broker answers "
            "a zero-wait fetch with no topics at all)."
        ),
    )
    kafka_fetch_min_wait_ms: int | None = Field(
        default=None,
        ge=1,
        le=60_000,
        description=(
            "The fetch wait while records flow or a reply is awaited. Default: 1 on the "
            "embedded broker (each hop then costs about a millisecond), the idle wait on "
            "Kafka (which long-polls, so a long wait costs no latency)."
        ),
    )
    kafka_fetch_max_wait_ms: int | None = Field(
        default=None,
        ge=1,
        le=60_000,
        description=(
            "The longest a fetch may wait at the broker, reached when a consumer has been "
            "idle for a while. Default: 100 on the embedded broker (an idle consumer then "
            "costs under 1% of a core), 500 on Kafka (its own default). 0 is refused: "
            "Tansu answers a zero-wait fetch with no data at all."
        ),
    )
    kafka_fetch_backoff_ratio: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description=(
            "How fast an idle consumer backs off: each fetch may wait this fraction of "
            "the time since the consumer last saw a record (between the min and max "
            "waits), so the latency a quiet period adds stays a few percent of that period."
        ),
    )
    kafka_session_timeout_ms: int = Field(
        default=10_000,
        ge=500,
        le=600_000,
        description="Consumer-group session timeout; a group join on Tansu takes about half.",
    )
    kafka_heartbeat_interval_ms: int = Field(default=3_000, ge=100, le=600_000)
    kafka_max_poll_records: int = Field(
        default=500, ge=1, le=100_000, description="Most records one fetch hands to the bus."
    )

    # Producing
    kafka_linger_ms: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description=(
            "How long the producer waits to fill a batch. aiokafka already batches what "
            "queues up while a request is in flight, so 0 costs no throughput and adds "
            "no latency to request/response."
        ),
    )
    kafka_max_batch_bytes: int = Field(default=65_536, ge=1024, le=64 * 1024 * 1024)
    kafka_request_timeout_ms: int = Field(default=30_000, ge=1000, le=600_000)
    kafka_metadata_max_age_ms: int = Field(
        default=10_000,
        ge=500,
        le=3_600_000,
        description=(
            "How often every client refreshes the cluster's metadata even when nothing "
            "failed. A consumer group notices a topic whose partition count changed only "
            "then: a broker restarted without its data re-creates topics with its own "
            "count (Tansu: 4), and the partitions no member was assigned would go unread "
            "until the next refresh (aiokafka's default is 5 minutes)."
        ),
    )

    # Security (production)
    kafka_security_protocol: SecurityProtocol = "PLAINTEXT"
    kafka_sasl_mechanism: SaslMechanism | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None

    # Delivery
    bus_retry_attempts: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Attempts a handler gets before the DLQ (first included).",
    )
    bus_retry_backoff_ms: int = Field(default=100, ge=0, le=600_000)
    bus_retry_backoff_max_ms: int = Field(default=5_000, ge=0, le=3_600_000)
    bus_partition_concurrency: int = Field(
        default=8,
        ge=1,
        le=1000,
        description=(
            "Handlers running at once per partition. Records of one key (one plan, or "
            "one correlation) are always handled one at a time in order; 1 handles a "
            "whole partition in order."
        ),
    )
    bus_commit_interval_ms: int | None = Field(
        default=None,
        ge=0,
        le=60_000,
        description=(
            "Least time between two offset commits of a consumer: under load one commit "
            "covers many records. A crash redelivers at most this much more (handlers "
            "are idempotent); stopping and rebalancing commit at once. Unset: 100 on "
            "Kafka (each commit is a write at the broker), 0 on the embedded broker "
            "(see ``commit_interval_ms``)."
        ),
    )
    bus_dedup_window_size: int = Field(
        default=100_000, ge=0, le=100_000_000, description="Envelope ids remembered per consumer."
    )
    bus_dedup_ttl_seconds: float = Field(default=3_600.0, ge=0, le=30 * 24 * 3600)
    bus_shutdown_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description=(
            "Bound on stopping an agent process on SIGTERM/SIGINT, whatever the broker's "
            "state: handlers get part of it to finish, commits and leaving the group are "
            "cut short when the broker does not answer, and the process exits at the bound."
        ),
    )
    bus_gc_tuning: bool = Field(
        default=True,
        description=(
            "At the first start of a bus client in the process, freeze the objects alive "
            "then (imports, schemas, settings) out of the cyclic garbage collector "
            "(gc.freeze) and collect its young generation every 10,000 allocations "
            "instead of 700 (a higher threshold already set is kept): envelopes, records "
            "and spans in flight were walked again and again (measured: a quarter to a "
            "third of the CPU per message under load). False leaves the collector alone."
        ),
    )
    bus_reconnect_backoff_max_seconds: float = Field(
        default=10.0,
        ge=0.1,
        le=600,
        description=(
            "Longest wait between two attempts to reach a broker that is down when an "
            "agent starts (the wait doubles from 0.5 s up to this)."
        ),
    )
    bus_max_message_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        le=100 * 1024 * 1024,
        description="Largest record (value + key + headers) a publish may send.",
    )

    # Observability (agents; services serve /metrics on their HTTP port)
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description=(
            "Serve the agent's Prometheus metrics (consumed, produced, handler time, "
            "failures, retries, dead letters, lag, in flight) on this port at /metrics; "
            "unset means no metrics are counted."
        ),
    )
    metrics_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Interface the metrics server binds (0.0.0.0 in a container).",
    )
    bus_no_partitions_warning_seconds: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description=(
            "An agent whose consumer has had no partition for longer than this says so: a "
            "warning in its log, 503 on its /readyz (DISCO_METRICS_PORT) and a mark on its "
            "registration that `disco status` shows. Normal joins take a few seconds (a "
            "killed member's session, on the embedded broker); an instance beyond the "
            "number of partitions also has none."
        ),
    )
    metrics_lag_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="How often a consumer measures its partitions' lag (end offsets).",
    )

    # Identity: who issued the tokens (HTTP) and the bus credentials (envelopes)
    auth_secret: SecretStr | None = Field(
        default=None, description="HS256 secret. In dev a built-in default is used when unset."
    )
    auth_jwks_url: str | None = Field(
        default=None, description="JWKS document to verify asymmetric tokens with (production)."
    )
    auth_algorithms: Annotated[tuple[TokenAlgorithm, ...], NoDecode] = Field(
        default=("HS256", "RS256", "ES256"),
        min_length=1,
        description=(
            "The signature algorithms tokens and bus credentials may use, comma-separated: "
            "HMAC ones (HS*) are verified with DISCO_AUTH_SECRET, the others with the keys "
            "of DISCO_AUTH_JWKS_URL. A token signed with any other is refused, even with "
            "the right secret (an HS512 token where the deployment signs HS256)."
        ),
    )
    auth_audience: str | None = Field(default=None, description="Required `aud`, when set.")
    auth_issuer: str | None = Field(default=None, description="Required `iss`, when set.")
    auth_leeway_seconds: int = Field(default=10, ge=0, le=300)
    auth_jwks_cache_seconds: int = Field(default=300, ge=1)

    # Tenant credentials on the bus
    bus_require_tenant_credential: bool | None = Field(
        default=None,
        description=(
            "Refuse (dead-letter with reason `unauthenticated_tenant`) every consumed "
            "envelope whose tenant no valid `disco-tenant-credential` header vouches for. "
            "Unset: required unless DISCO_ENV=dev."
        ),
    )
    bus_credential_ttl_seconds: int = Field(
        default=900,
        ge=30,
        le=86_400,
        description=(
            "Lifetime of the credentials an agent mints for its envelopes (dev, or with "
            "DISCO_AUTH_SECRET); a new one is minted with a fifth of it left. Consumers "
            "refuse an expired credential, so keep it above the longest consumer lag."
        ),
    )
    bus_credential_cache_size: int = Field(
        default=10_000,
        ge=1,
        le=10_000_000,
        description="Distinct verified credentials a consumer remembers (until each expires).",
    )

    @property
    def tenant_credential_required(self) -> bool:
        """Whether consumers refuse envelopes without a credential for their tenant."""
        if self.bus_require_tenant_credential is not None:
            return self.bus_require_tenant_credential
        return self.env != "dev"

    def hs256_secret(self) -> str | None:
        """The HMAC secret tokens are signed and verified with, or None when only JWKS is used."""
        if self.auth_secret is not None:
            return self.auth_secret.get_secret_value()
        if self.env == "dev" and not self.auth_jwks_url:
            return DEV_AUTH_SECRET
        return None

    @field_validator("auth_algorithms", mode="before")
    @classmethod
    def _algorithm_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("topic_prefix")
    @classmethod
    def _valid_prefix(cls, value: str) -> str:
        return validate_topic_prefix(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.kafka_heartbeat_interval_ms >= self.kafka_session_timeout_ms:
            raise ValueError(
                "kafka_heartbeat_interval_ms must be below kafka_session_timeout_ms "
                "(about a third of it is usual)"
            )
        if (
            self.kafka_fetch_min_wait_ms is not None
            and self.kafka_fetch_max_wait_ms is not None
            and self.kafka_fetch_min_wait_ms > self.kafka_fetch_max_wait_ms
        ):
            raise ValueError("kafka_fetch_min_wait_ms must not exceed kafka_fetch_max_wait_ms")
        if self.bus_retry_backoff_max_ms < self.bus_retry_backoff_ms:
            raise ValueError("bus_retry_backoff_max_ms must be at least bus_retry_backoff_ms")
        if self.kafka_security_protocol.startswith("SASL_") and (
            self.kafka_sasl_mechanism is None
            or not self.kafka_sasl_username
            or self.kafka_sasl_password is None
        ):
            raise ValueError(
                f"kafka_security_protocol={self.kafka_security_protocol} needs "
                "DISCO_KAFKA_SASL_MECHANISM, DISCO_KAFKA_SASL_USERNAME and "
                "DISCO_KAFKA_SASL_PASSWORD"
            )
        return self

    def fetch_waits(self, kind: BrokerKind) -> tuple[int, int]:
        """The (min, max) fetch waits in ms on a broker of ``kind``: the settings', else
        the kind's defaults (see ``kafka_broker_kind``)."""
        default_min, default_max = _FETCH_WAITS[kind]
        longest = self.kafka_fetch_max_wait_ms or default_max
        shortest = self.kafka_fetch_min_wait_ms or default_min or longest
        return min(shortest, longest), longest

    def commit_interval_ms(self, kind: BrokerKind) -> int:
        """The least time in ms between two offset commits of a consumer on a broker of
        ``kind``: the setting's, else the kind's default.

        On the embedded broker a commit right after each handled batch (one in flight,
        as a plain aiokafka loop commits) is the default: its writes are cheap, and a
        fetch it holds answers records written meanwhile sooner once another request
        arrives (``bench/timeline.py``: an answer reached a one-at-a-time caller about
        1 ms sooner). Kafka answers a held fetch as soon as data arrives, so there
        commits are spaced to spare its writes.
        """
        if self.bus_commit_interval_ms is not None:
            return self.bus_commit_interval_ms
        return _COMMIT_INTERVALS[kind]

    def kafka_connection_options(self) -> dict[str, Any]:
        """Keyword arguments every aiokafka client of this bus takes."""
        options: dict[str, Any] = {
            "bootstrap_servers": self.kafka_bootstrap,
            "client_id": self.kafka_client_id,
            "request_timeout_ms": self.kafka_request_timeout_ms,
            "metadata_max_age_ms": self.kafka_metadata_max_age_ms,
            "security_protocol": self.kafka_security_protocol,
        }
        if self.kafka_security_protocol in {"SSL", "SASL_SSL"}:
            options["ssl_context"] = self._ssl_context()
        if self.kafka_sasl_mechanism is not None:
            options["sasl_mechanism"] = self.kafka_sasl_mechanism
            options["sasl_plain_username"] = self.kafka_sasl_username
            password = self.kafka_sasl_password
            options["sasl_plain_password"] = password.get_secret_value() if password else None
        return options

    def _ssl_context(self) -> ssl.SSLContext:
        from aiokafka.helpers import create_ssl_context

        cafile = str(self.kafka_ssl_cafile) if self.kafka_ssl_cafile is not None else None
        context: ssl.SSLContext = create_ssl_context(cafile=cafile)
        return context


class ServiceClientSettings(BaseSettings):
    """How an agent reaches the registry, memory, tracker and gateway.

    Authentication: ``DISCO_AUTH_TOKEN`` when the operator issued one; otherwise
    (dev) a token is minted from ``DISCO_AUTH_SECRET`` (the dev default when
    unset) for ``DISCO_TENANT_ID``/``DISCO_USER_ID`` with the roles in
    ``DISCO_AGENT_ROLES`` — ``service`` by default, so a local agent may act for
    the tenant of each envelope it handles.
    """

    model_config = SettingsConfigDict(env_prefix="DISCO_", extra="ignore", frozen=True)

    registry_url: str = "http://127.0.0.1:8081"
    memory_url: str = "http://127.0.0.1:8082"
    tracker_url: str = "http://127.0.0.1:8083"
    gateway_url: str = "http://127.0.0.1:8080"
    auth_token: SecretStr | None = Field(default=None, description="A bearer token to use as is.")
    auth_secret: SecretStr | None = Field(default=None, description="Dev: the HS256 secret.")
    tenant_id: TenantId = Field(default="default", description="Dev: tenant of minted tokens.")
    user_id: Id = Field(default="agent", description="Dev: user of minted tokens.")
    agent_roles: tuple[Role, ...] = Field(default=(Role.SERVICE,))
    http_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    http_retries: int = Field(default=2, ge=0, le=10)

    def token_provider(self) -> TokenProvider:
        """The token source these settings describe."""
        return token_provider_from_settings(
            auth_token=self.auth_token,
            auth_secret=self.auth_secret,
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            roles=self.agent_roles,
        )


def token_provider_from_settings(
    *,
    auth_token: SecretStr | None,
    auth_secret: SecretStr | None,
    tenant_id: str,
    user_id: str,
    roles: tuple[Role, ...] = (Role.SERVICE,),
) -> TokenProvider:
    """The token source the settings describe: a given token, else dev minting."""
    if auth_token is not None and auth_token.get_secret_value():
        return StaticToken(auth_token.get_secret_value())
    secret = auth_secret.get_secret_value() if auth_secret is not None else DEV_AUTH_SECRET
    return DevTokenMinter(secret, tenant_id=tenant_id, user_id=user_id, roles=roles)
