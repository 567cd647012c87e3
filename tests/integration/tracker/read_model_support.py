"""A tracker app for the read-model tests: in-process, real Postgres and broker.

Each test module starts one app (``tracker = tracker_fixture()``); tests keep
apart by tenant (``tracker.new_tenant()``), so one app serves them all.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest_asyncio
import uvicorn
from fastapi import FastAPI

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from disco_tracker.main import create_app
from disco_tracker.settings import TrackerSettings
from disco_tracker.state import TrackerState
from tests.fixtures.infra import DatabaseUrls

__all__ = ["TrackerApp", "eventually", "running_tracker", "tracker_fixture"]

T = TypeVar("T")


def auth(tenant: str, user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_dev_token(DEV_AUTH_SECRET, tenant, user)}"}


async def eventually(
    read: Callable[[], Awaitable[T]], done: Callable[[T], bool], *, timeout: float = 30.0
) -> T:
    """Poll ``read`` until ``done`` holds; fail with the last value after ``timeout``."""
    seen: T | None = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                seen = await read()
                if done(seen):
                    return seen
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"not reached within {timeout}s; last seen: {seen!r}") from None


@dataclass
class TrackerApp:
    """A started tracker app, an HTTP client of it and a bus to publish with."""

    app: FastAPI
    http: httpx.AsyncClient
    bus: BusClient
    settings: TrackerSettings
    bootstrap: str

    @property
    def url(self) -> str:
        return str(self.http.base_url).rstrip("/")

    @property
    def prefix(self) -> str:
        return self.settings.topic_prefix

    @property
    def state(self) -> TrackerState:
        return TrackerState.of(self.app)

    @staticmethod
    def new_tenant(name: str = "t") -> str:
        return f"{name}-{uuid.uuid4().hex[:10]}"

    async def publish(self, envelopes: Iterable[tuple[Topic, Envelope]]) -> None:
        """Publish ready-made envelopes, in order, and wait for the broker's acks."""
        acks = [await self.bus.send_envelope(topic, envelope) for topic, envelope in envelopes]
        await asyncio.gather(*acks)

    async def get(self, path: str, tenant: str, **params: Any) -> httpx.Response:
        return await self.http.get(
            path, headers=auth(tenant), params={k: v for k, v in params.items() if v is not None}
        )

    async def json(self, path: str, tenant: str, **params: Any) -> Any:
        response = await self.get(path, tenant, **params)
        assert response.status_code == 200, response.text
        return response.json()

    async def found(self, path: str, tenant: str, **params: Any) -> Any:
        """The JSON at ``path``, or None while it is 404."""
        response = await self.get(path, tenant, **params)
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        return response.json()

    async def wait_for_plan(
        self, tenant: str, plan_id: str, done: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """The plan view once ``done`` holds for it."""

        async def read() -> dict[str, Any]:
            response = await self.get(f"/v1/tracker/plans/{plan_id}", tenant)
            return response.json() if response.status_code == 200 else {}

        return await eventually(read, lambda view: bool(view) and done(view))

    async def wait_applied(self, count: int, *, timeout: float = 30.0) -> None:
        """Until the ingest applied at least ``count`` envelopes (new ones, not duplicates)."""
        registry = self.state.metrics.registry

        async def read() -> float:
            return registry.get_sample_value("disco_tracker_ingested_envelopes_total") or 0.0

        await eventually(read, lambda value: value >= count, timeout=timeout)


def tracker_settings(
    database: DatabaseUrls, bootstrap: str, prefix: str, **overrides: Any
) -> TrackerSettings:
    values: dict[str, Any] = {
        "env": "dev",
        "database_url": database.app,
        "kafka_bootstrap": bootstrap,
        "topic_prefix": prefix,
        # Room for the event loop to stall (the test shares it with the app).
        "kafka_session_timeout_ms": 4000,
        "kafka_heartbeat_interval_ms": 1000,
        "hitl_sweep_interval_seconds": 0.2,
        "outbox_sweep_interval_seconds": 0.5,
        "feed_poll_seconds": 0.5,
        "log_json": True,
    }
    values.update(overrides)
    return TrackerSettings(**values)


@asynccontextmanager
async def _serve(app: FastAPI, port: int) -> AsyncIterator[None]:
    """Serve ``app`` on a loopback port (lifespan included) until the block ends.

    Open feed streams never end by themselves: on the way out they get a second
    to finish before uvicorn cancels them, as ``python -m disco_tracker`` does
    after its grace period.
    """
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        lifespan="on",
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(60):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.05)
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=60)


@asynccontextmanager
async def running_tracker(
    settings: TrackerSettings, bus: BusClient, *, port: int | None = None
) -> AsyncIterator[TrackerApp]:
    """A tracker app serving ``settings`` on a loopback port until the block exits.

    A real HTTP server (uvicorn), so that streams (the SSE feed) stream. Its
    ingest has partitions when this yields.
    """
    app = create_app(settings)
    port = port or free_port()
    async with (
        _serve(app, port),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        state = TrackerState.of(app)
        assert state.ingest is not None
        await state.ingest.wait_assigned(30)
        yield TrackerApp(app, http, bus, settings, settings.kafka_bootstrap)


def tracker_fixture(**overrides: Any) -> Any:
    """A module-scoped fixture ``tracker``: one app for the module's tests."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def tracker(
        database: DatabaseUrls, kafka_bootstrap: str, session_topic_prefix: str
    ) -> AsyncIterator[TrackerApp]:
        prefix = f"{session_topic_prefix}trk{uuid.uuid4().hex[:6]}."
        settings = tracker_settings(database, kafka_bootstrap, prefix, **overrides)
        bus_settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix)
        async with BusClient(bus_settings, source="test://publisher") as bus:
            await bus.ensure_topics()
            async with running_tracker(settings, bus) as tracker:
                yield tracker

    return tracker
