"""One settings object per service, read from ``DISCO_*`` environment variables."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from disco.auth import DEV_AUTH_SECRET
from disco.settings import BusSettings
from disco_common.ids import AgentName
from disco_common.services import ServiceManifest

__all__ = [
    "DEFAULT_DATABASE_URL",
    "GatewayLinkSettings",
    "ServiceSettings",
    "settings_env_vars",
]

DEFAULT_DATABASE_URL = "postgresql+asyncpg://disco_app:disco_app@127.0.0.1:5432/disco"

# Values that mean "nobody set this": refused outside dev (STYLE 11).
_PLACEHOLDERS = frozenset(
    {"", "changethis", "changeme", "change-me", "secret", "password", "disco", "disco_app"}
)
_MIN_SECRET_LENGTH = 32


def _normalise_database_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    base = scheme.split("+", 1)[0]
    if not sep or base not in {"postgresql", "postgres"}:
        raise ValueError("database_url must be a PostgreSQL URL (postgresql://...)")
    # The services are async all the way: whatever driver was named, use asyncpg.
    return f"postgresql+asyncpg://{rest}"


class ServiceSettings(BusSettings):
    """What every disco service is configured with (env prefix ``DISCO_``).

    The Kafka fields (``DISCO_KAFKA_BOOTSTRAP``, ``DISCO_TOPIC_PREFIX``, ...) come
    from the SDK's :class:`disco.settings.BusSettings`, so services and agents
    read the bus configuration the same way.

    Each service subclasses this, sets :attr:`service_name` and redefines
    ``port`` with its default and its own variable: ``DISCO_<SERVICE>_PORT``
    (e.g. ``DISCO_REGISTRY_PORT``). Everything else is shared by all services:
    one environment can configure the whole stack.
    """

    # Merged with BusSettings' config (env prefix ``DISCO_``); ``populate_by_name``
    # lets code pass ``port=`` although the variable is ``DISCO_<SERVICE>_PORT``.
    model_config = SettingsConfigDict(populate_by_name=True)

    service_name: ClassVar[str] = "service"
    """The service's name: its Postgres schema, its log and trace ``service``."""

    @classmethod
    def manifest(cls, *, module: str, start_order: int) -> ServiceManifest:
        """What the disco tooling needs to find, migrate and run this service.

        Publish it under the ``disco.services`` entry-point group of the
        service's ``pyproject.toml`` (see :mod:`disco_common.services`). The
        name and default port come from these settings; the migrations are the
        Alembic environment in the ``migrations/`` folder of ``module`` (where the
        service's wheel carries the repository's ``migrations/<name>/``).

        Args:
            module: the service's package, run with ``python -m <module>``.
            start_order: services start in ascending order.
        """
        return ServiceManifest(
            name=cls.service_name,
            module=module,
            default_port=cls.model_fields["port"].default,
            migrations=f"{module}:migrations",
            start_order=start_order,
        )

    host: str = Field(default="127.0.0.1", description="Interface the HTTP server binds.")
    port: int = Field(default=8000, ge=1, le=65535, description="HTTP port.")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="The application role's URL (not the owner's); asyncpg is used whatever "
        "driver it names.",
    )
    database_pool_size: int = Field(
        default=16,
        ge=1,
        le=200,
        description=(
            "Connections kept open. Requests beyond it open overflow connections that are "
            "closed again after one use (a new connection costs a TLS attempt and "
            "authentication: measured, it dominated the registry's CPU at 16 concurrent "
            "requests with 5), so size it to the concurrency a process serves."
        ),
    )
    database_max_overflow: int = Field(default=8, ge=0, le=200)
    database_pool_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description=(
            "Longest wait for a pooled connection. With a stalled database every "
            "connection is stuck, and a request answers 503 after this instead of waiting."
        ),
    )
    database_connect_timeout_seconds: float = Field(default=5.0, gt=0, le=120)
    database_statement_timeout_ms: int = Field(
        default=5000,
        ge=100,
        le=3_600_000,
        description=(
            "Longest a statement may run: Postgres cancels it (statement_timeout), and "
            "the client gives up on an answer a second later (the server may be "
            "stalled and cancel nothing). A request that hits it answers 503."
        ),
    )

    max_body_bytes: int = Field(default=1_048_576, ge=1, description="Largest request body.")
    http_head_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description=(
            "A request's head (request line and headers) must arrive within this, else 408 "
            "and the connection closes (slow clients, slowloris)."
        ),
    )
    http_body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Longest wait for the next chunk of a request body, else 408.",
    )
    http_keep_alive_seconds: int = Field(
        default=5, ge=1, le=300, description="An idle kept-alive connection closes after this."
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description=(
            "Comma-separated addresses or networks of the proxies whose X-Forwarded-For and "
            "X-Forwarded-Proto are believed (the caller's address then is the client's, not "
            "the proxy's); `*` believes anyone."
        ),
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    log_json: bool | None = Field(
        default=None,
        description="JSON logs; unset means JSON unless in dev on a terminal.",
    )
    otel_operation_spans: bool = Field(
        default=False,
        description=(
            "Also trace dependency resolution, endpoints and serialisation (FastAPI's "
            "operation spans). Off by default: they cost more than a small request."
        ),
    )
    otel_sql_spans: bool = Field(
        default=True,
        description=(
            "A client span per SQL statement (SQLAlchemy instrumentation) when spans are "
            "exported (DISCO_OTEL_EXPORTER_OTLP_ENDPOINT set)."
        ),
    )
    otel_http_client_spans: bool = Field(
        default=True, description="A client span per outgoing HTTP call (httpx instrumentation)."
    )
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None, description="OTLP/HTTP endpoint for traces; unset means no export."
    )
    otel_traces_sample_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "Sample this share of new traces (parent-based: a span whose caller's trace is "
            "sampled is sampled, one whose caller's is not is not, so a trace is whole or "
            "absent). Unset: the OpenTelemetry SDK's own choice (OTEL_TRACES_SAMPLER, "
            "default every trace). 0.1 is a usual production value."
        ),
    )

    readiness_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    outbox_sweep_interval_seconds: float = Field(default=5.0, gt=0)
    outbox_batch_size: int = Field(default=100, ge=1, le=10_000)
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _asyncpg_url(cls, value: str) -> str:
        return _normalise_database_url(value)

    @model_validator(mode="after")
    def _production_needs_real_secrets(self) -> Self:
        if self.env != "production":
            return self
        problems: list[str] = []
        secret = self.auth_secret.get_secret_value() if self.auth_secret else None
        if secret is None and not self.auth_jwks_url:
            problems.append("set DISCO_AUTH_JWKS_URL (or DISCO_AUTH_SECRET) in production")
        if secret is not None and (
            secret.lower() in _PLACEHOLDERS
            or secret == DEV_AUTH_SECRET
            or len(secret) < _MIN_SECRET_LENGTH
        ):
            problems.append(
                "DISCO_AUTH_SECRET is a placeholder, the dev default or shorter than "
                f"{_MIN_SECRET_LENGTH} characters; generate one (`openssl rand -hex 32`)"
            )
        password = urlsplit(self.database_url).password
        if password is not None and password.lower() in _PLACEHOLDERS:
            problems.append("DISCO_DATABASE_URL uses a placeholder password in production")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def is_dev(self) -> bool:
        """Whether this is a dev deployment."""
        return self.env == "dev"

    def redacted_database_url(self) -> str:
        """The database URL with its password masked, for logs."""
        parts = urlsplit(self.database_url)
        if parts.password:
            return self.database_url.replace(f":{parts.password}@", ":***@", 1)
        return self.database_url


class GatewayLinkSettings(ServiceSettings):
    """Settings of a service that shows the gateway to outside callers (the registry, the gateway).

    Both build A2A cards with :mod:`disco_common.a2a_cards` from the same two
    variables, so that a card says the same wherever it is fetched.
    """

    gateway_public_url: str = Field(
        default="http://127.0.0.1:8080",
        min_length=1,
        validation_alias=AliasChoices("DISCO_GATEWAY_PUBLIC_URL", "DISCO_GATEWAY_URL"),
        description=(
            "The gateway's URL as outside callers reach it: A2A cards name it in their "
            "interfaces (DISCO_GATEWAY_PUBLIC_URL; DISCO_GATEWAY_URL when unset)."
        ),
    )
    gateway_public_agents: Annotated[tuple[AgentName, ...], NoDecode] = Field(
        default=(),
        validation_alias=AliasChoices("DISCO_GATEWAY_PUBLIC_AGENTS"),
        description=(
            "Agents outside callers may use through the gateway without a token, "
            "comma-separated (DISCO_GATEWAY_PUBLIC_AGENTS); their cards require no token."
        ),
    )

    card_max_age_seconds: int = Field(
        default=60,
        ge=0,
        validation_alias=AliasChoices("DISCO_GATEWAY_CARD_MAX_AGE_SECONDS"),
        description=(
            "How long a client may keep an A2A card before it revalidates it with its ETag "
            "(DISCO_GATEWAY_CARD_MAX_AGE_SECONDS): its Cache-Control max-age."
        ),
    )

    gateway_grpc_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("DISCO_GATEWAY_GRPC_PORT"),
        description=(
            "The port of the gateway's A2A gRPC binding (DISCO_GATEWAY_GRPC_PORT); unset, "
            "the gateway serves no gRPC and cards list JSON-RPC and HTTP+JSON only."
        ),
    )
    gateway_grpc_public_address: str | None = Field(
        default=None,
        min_length=1,
        validation_alias=AliasChoices("DISCO_GATEWAY_GRPC_PUBLIC_ADDRESS"),
        description=(
            "The gRPC binding's `host:port` as outside callers reach it, named by cards "
            "(DISCO_GATEWAY_GRPC_PUBLIC_ADDRESS); unset: the public URL's host and "
            "DISCO_GATEWAY_GRPC_PORT."
        ),
    )

    @property
    def gateway_grpc_address(self) -> str | None:
        """Where cards say the gRPC binding is (``host:port``), or None without one."""
        if self.gateway_grpc_port is None:
            return None
        if self.gateway_grpc_public_address:
            return self.gateway_grpc_public_address
        host = urlsplit(self.gateway_public_url).hostname or "127.0.0.1"
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        return f"{host}:{self.gateway_grpc_port}"

    @field_validator("gateway_public_agents", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    def is_public_agent(self, name: str) -> bool:
        """Whether outside callers may use agent ``name`` without a token."""
        return name in self.gateway_public_agents


def settings_env_vars(settings_cls: type[BaseSettings]) -> dict[str, str]:
    """The environment variables ``settings_cls`` reads, mapped to field names.

    Upper-case names; a field with a validation alias is read under the alias
    only (that is how ``port`` becomes ``DISCO_REGISTRY_PORT``).
    """
    prefix = str(settings_cls.model_config.get("env_prefix", ""))
    names: dict[str, str] = {}
    for field_name, info in settings_cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            for choice in alias.choices:
                if isinstance(choice, str):
                    names[choice.upper()] = field_name
        elif isinstance(alias, str):
            names[alias.upper()] = field_name
        else:
            names[f"{prefix}{field_name}".upper()] = field_name
    return names
