"""What a running service holds: one typed container on ``app.state.disco``.

Every service keeps its state the same way: a :class:`ServiceState` subclass
(``RegistryState(ServiceState[RegistrySettings])``) built in its
``create_app``, holding its settings, what the kit starts in the lifespan
(database, bus, outbox relay) and the service's own long-lived objects.
Routes reach it through a dependency calling :meth:`ServiceState.of`;
lifespan hooks are handed it. Nothing else is put on ``app.state``.

This module depends on the parts it holds and nothing depends on it but the
wiring (``_app``, ``_deps``, ``_operations``, ``_run``): it closes no cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, Self, TypeVar

from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from starlette.requests import HTTPConnection

from disco.bus import BusClient
from disco_service._auth import TokenVerifier
from disco_service._db import Database
from disco_service._metrics import ServiceMetrics
from disco_service._outbox import OutboxRelay
from disco_service._settings import ServiceSettings
from disco_service._tracing import create_tracer_provider

__all__ = ["ReadinessCheck", "ServiceState", "get_state"]

SettingsT_co = TypeVar("SettingsT_co", bound=ServiceSettings, covariant=True)

ReadinessCheck = Callable[[], Awaitable[None]]
"""A dependency check for ``/readyz``: returns when healthy, raises otherwise."""


class ServiceState(Generic[SettingsT_co]):
    """Everything one app instance holds, typed by the service's settings.

    Subclass it to add what the service itself keeps for its lifetime
    (``self.heartbeats = HeartbeatBatcher(self)``), build it in
    ``create_app`` and hand it to :func:`disco_service.create_service_app`.

    ``database``, ``bus`` and ``relay`` are None until the lifespan started
    them (and when the app was built without them).

    Args:
        settings: the service's settings.
        schema: the Postgres schema the service owns (default: ``settings.service_name``).
    """

    def __init__(self, settings: SettingsT_co, *, schema: str | None = None) -> None:
        self._settings = settings
        self.schema = schema or settings.service_name
        self.metrics = ServiceMetrics(settings.service_name)
        self.verifier = TokenVerifier(settings)
        self.tracer_provider: TracerProvider = create_tracer_provider(settings)
        self.database: Database | None = None
        self.bus: BusClient | None = None
        self.relay: OutboxRelay | None = None
        self.readiness_checks: dict[str, ReadinessCheck] = {}
        self._starting: list[asyncio.Task[None]] = []

    @property
    def settings(self) -> SettingsT_co:
        """The service's settings."""
        return self._settings

    @classmethod
    def of(cls, connection: HTTPConnection | FastAPI) -> Self:
        """The state of the app serving ``connection`` (or of ``app``), as this class.

        Raises:
            RuntimeError: the app was not built with :func:`create_service_app`
                and a state of this class.
        """
        app = connection if isinstance(connection, FastAPI) else connection.app
        state = getattr(app.state, "disco", None)
        if not isinstance(state, cls):
            raise RuntimeError(
                f"the app holds no {cls.__name__}: build it with create_service_app({cls.__name__}"
                "(settings), ...)"
            )
        return state

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

    def start_alongside(self, start: Coroutine[Any, Any, None], *, name: str) -> None:
        """Run ``start`` now, side by side with the rest of the service's start.

        For a lifespan hook's slow start that needs nothing after it, such as a
        consumer joining its group: a join waits for the group's coordinator
        (half a session timeout on the embedded broker, the initial rebalance
        delay on Kafka), so a service with three groups joined one after the
        other started three times slower. The service counts as started once
        every such start finished; one that fails fails the start, and one
        still running when the start fails is cancelled before the hook that
        began it is exited.
        """
        self._starting.append(asyncio.create_task(start, name=f"start-{name}"))

    def _take_starting(self) -> list[asyncio.Task[None]]:
        starting, self._starting = self._starting, []
        return starting


def get_state(connection: HTTPConnection | FastAPI) -> ServiceState[ServiceSettings]:
    """The :class:`ServiceState` of the app serving ``connection`` (or of ``app``).

    A service's own code uses its subclass's :meth:`ServiceState.of` instead,
    which is typed with its settings and its own fields.
    """
    return ServiceState.of(connection)
