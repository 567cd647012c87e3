"""What a running service holds: created in the lifespan, reached from requests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.requests import HTTPConnection

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from disco.bus import BusClient
    from disco_service._auth import TokenVerifier
    from disco_service._db import Database
    from disco_service._metrics import ServiceMetrics
    from disco_service._outbox import OutboxRelay
    from disco_service._settings import ServiceSettings

__all__ = ["ReadinessCheck", "ServiceState", "get_state"]

ReadinessCheck = Callable[[], Awaitable[None]]
"""A dependency check for ``/readyz``: returns when healthy, raises otherwise."""


@dataclass
class ServiceState:
    """Everything the lifespan created for one app instance.

    ``database``, ``bus`` and ``relay`` are None until the lifespan started
    them (and when the app was built without them).
    """

    settings: ServiceSettings
    schema: str
    metrics: ServiceMetrics
    verifier: TokenVerifier
    tracer_provider: TracerProvider
    database: Database | None = None
    bus: BusClient | None = None
    relay: OutboxRelay | None = None
    readiness_checks: dict[str, ReadinessCheck] = field(default_factory=dict)

    def require_database(self) -> Database:
        """The database, or an error saying the app was built without one."""
        if self.database is None:
            raise RuntimeError(
                "this app has no database: build it with create_service_app(..., database=True) "
                "and run it inside its lifespan"
            )
        return self.database

    def require_bus(self) -> BusClient:
        """The bus client, or an error saying the app was built without one."""
        if self.bus is None:
            raise RuntimeError(
                "this app has no bus: build it with create_service_app(..., bus=True) "
                "and run it inside its lifespan"
            )
        return self.bus


def get_state(connection: HTTPConnection | FastAPI) -> ServiceState:
    """The :class:`ServiceState` of the app serving ``connection`` (or of ``app``)."""
    app = connection if isinstance(connection, FastAPI) else connection.app
    state = getattr(app.state, "disco", None)
    if not isinstance(state, ServiceState):
        raise RuntimeError("not a disco service app: build it with create_service_app()")
    return state
