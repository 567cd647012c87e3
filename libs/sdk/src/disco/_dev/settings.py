"""Settings of the local stack (``disco dev ...``, ``disco db upgrade``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from disco._dev.dburl import with_user

__all__ = ["DEFAULT_APP_PASSWORD", "DEFAULT_APP_ROLE", "SERVICE_PORTS", "DevSettings"]

DEFAULT_APP_ROLE = "disco_app"
DEFAULT_APP_PASSWORD = "disco_app"  # noqa: S105  local default; production sets DISCO_DATABASE_URL

# The services in the order they start, with their default ports (DESIGN.md).
SERVICE_PORTS: dict[str, int] = {"registry": 8081, "memory": 8082, "tracker": 8083, "gateway": 8080}


class DevSettings(BaseSettings):
    """Where the local stack puts things, and what it reuses instead of starting.

    Setting ``DISCO_DATABASE_URL`` (or ``DISCO_DATABASE_ADMIN_URL``) or
    ``DISCO_KAFKA_BOOTSTRAP`` makes the stack use that server instead of starting
    its embedded one.
    """

    model_config = SettingsConfigDict(env_prefix="DISCO_", extra="ignore")

    state_dir: Path = Field(default=Path(".disco"), description="Data, logs and pid file.")
    postgres_port: int = Field(default=5432, ge=1, le=65535)
    kafka_port: int = Field(default=9092, ge=1, le=65535)
    database_name: str = Field(default="disco", pattern=r"^[a-z_][a-z0-9_]*$")
    database_url: str | None = Field(default=None, description="URL the services connect with.")
    database_admin_url: str | None = Field(default=None, description="Owner URL for migrations.")
    kafka_bootstrap: str | None = None
    topic_prefix: str = ""
    gateway_port: int = Field(default=SERVICE_PORTS["gateway"], ge=1, le=65535)
    registry_port: int = Field(default=SERVICE_PORTS["registry"], ge=1, le=65535)
    memory_port: int = Field(default=SERVICE_PORTS["memory"], ge=1, le=65535)
    tracker_port: int = Field(default=SERVICE_PORTS["tracker"], ge=1, le=65535)

    @property
    def external_database(self) -> bool:
        """Whether a database server was given, so none is started."""
        return self.database_url is not None or self.database_admin_url is not None

    @property
    def external_kafka(self) -> bool:
        """Whether a broker was given, so none is started."""
        return self.kafka_bootstrap is not None

    def embedded_admin_url(self) -> str:
        """The owner URL of the embedded server's database."""
        return f"postgresql://postgres@127.0.0.1:{self.postgres_port}/{self.database_name}"

    def admin_url(self) -> str:
        """The URL migrations run with (the schema owner)."""
        return self.database_admin_url or self.database_url or self.embedded_admin_url()

    def app_url(self) -> str:
        """The URL the services connect with (the application role)."""
        if self.database_url:
            return self.database_url
        return with_user(self.admin_url(), DEFAULT_APP_ROLE, DEFAULT_APP_PASSWORD)

    def bootstrap(self) -> str:
        """The Kafka bootstrap servers the stack uses."""
        return self.kafka_bootstrap or f"127.0.0.1:{self.kafka_port}"

    def service_port(self, service: str) -> int:
        """The port ``service`` listens on."""
        return int(getattr(self, f"{service}_port"))
