"""Settings of the local stack (``disco dev ...``, ``disco db upgrade``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from disco._dev.dburl import with_user
from disco._dev.errors import DevStackError
from disco_common.services import ServiceManifest

__all__ = ["DEFAULT_APP_PASSWORD", "DEFAULT_APP_ROLE", "DevSettings"]

DEFAULT_APP_ROLE = "disco_app"
DEFAULT_APP_PASSWORD = "disco_app"  # noqa: S105  local default; production sets DISCO_DATABASE_URL

_PORT: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=1, le=65535)])


class DevSettings(BaseSettings):
    """Where the local stack puts things, and what it reuses instead of starting.

    Setting ``DISCO_DATABASE_URL`` (or ``DISCO_DATABASE_ADMIN_URL``) or
    ``DISCO_KAFKA_BOOTSTRAP`` makes the stack use that server instead of starting
    its embedded one. Each service listens on ``DISCO_<NAME>_PORT``, else on
    the default port its manifest gives (see :meth:`service_port`).
    """

    model_config = SettingsConfigDict(env_prefix="DISCO_", extra="ignore")

    state_dir: Path = Field(default=Path(".disco"), description="Data, logs and pid file.")
    postgres_port: int = Field(default=5432, ge=1, le=65535)
    kafka_port: int = Field(default=9092, ge=1, le=65535)
    kafka_broker_threads: int = Field(
        default=1, ge=1, le=64, description="Worker threads of the embedded broker."
    )
    database_name: str = Field(default="disco", pattern=r"^[a-z_][a-z0-9_]*$")
    database_url: str | None = Field(default=None, description="URL the services connect with.")
    database_admin_url: str | None = Field(default=None, description="Owner URL for migrations.")
    kafka_bootstrap: str | None = None
    topic_prefix: str = ""

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

    def service_port(self, service: ServiceManifest) -> int:
        """The port ``service`` listens on: ``DISCO_<NAME>_PORT``, else its default.

        The service itself reads the same variable; the services are found at
        run time, so their variables are read here rather than declared as fields.

        Raises:
            DevStackError: the variable is set but is not a port.
        """
        variable = f"DISCO_{service.name.upper()}_PORT"
        raw = os.environ.get(variable)
        if raw is None:
            return service.default_port
        try:
            return _PORT.validate_python(raw)
        except ValidationError:
            raise DevStackError(f"{variable}={raw!r} is not a port (1-65535)") from None
