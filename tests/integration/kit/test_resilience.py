"""The kit keeps answering across a database restart, and never honours an expired token."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from disco_service import ServiceSettings, TokenVerifier, Unauthenticated
from disco_tracker.main import create_app
from disco_tracker.settings import TrackerSettings
from tests.fixtures.waiting import eventually


async def test_the_first_request_after_a_database_restart_succeeds(
    tmp_path: Path, kafka_bootstrap: str, topic_prefix: str
) -> None:
    server = EmbeddedPostgres(
        data_dir=tmp_path / "pg", port=free_port(), log_path=tmp_path / "pg.log", durable=False
    )
    server.start()
    try:
        server.create_database("disco")
        admin = with_database(server.dsn(), "disco")
        app_url = with_user(admin, "disco_app", "disco_app")
        await asyncio.to_thread(upgrade, admin, app_url, services=["tracker"])
        settings = TrackerSettings(
            env="dev",
            database_url=app_url,
            kafka_bootstrap=kafka_bootstrap,
            topic_prefix=topic_prefix,
            kafka_session_timeout_ms=1000,
            kafka_heartbeat_interval_ms=300,
        )
        headers = {"Authorization": f"Bearer {mint_dev_token(DEV_AUTH_SECRET, 'acme', 'alice')}"}
        app = create_app(settings)
        async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                before = await http.get("/v1/tracker/hitl", headers=headers)
                await asyncio.to_thread(server.stop)
                await asyncio.to_thread(server.start)
                after = await http.get("/v1/tracker/hitl", headers=headers)
                ready = await http.get("/readyz")
    finally:
        server.destroy()

    assert before.status_code == 200
    assert after.status_code == 200, after.text
    assert ready.status_code == 200, ready.text


async def test_a_remembered_token_is_refused_once_it_expires() -> None:
    verifier = TokenVerifier(ServiceSettings(env="dev", auth_leeway_seconds=0))
    token = mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", [Role.USER], ttl_seconds=2)

    first = await verifier.verify(token)
    again = await verifier.verify(token)  # from memory

    async def refused() -> Unauthenticated | None:
        try:
            await verifier.verify(token)
        except Unauthenticated as exc:
            return exc
        return None

    error = await eventually(refused, timeout=10, what="the token refused")
    refused_at = time.time()

    assert again == first
    assert first.exp is not None
    assert refused_at >= first.exp  # not a moment before it expired
    assert "expired" in str(error)


async def test_a_bad_token_is_refused_every_time() -> None:
    verifier = TokenVerifier(ServiceSettings(env="dev"))
    forged = mint_dev_token("another-secret-of-sufficient-length!!", "acme", "alice")

    for _ in range(2):
        with pytest.raises(Unauthenticated):
            await verifier.verify(forged)
