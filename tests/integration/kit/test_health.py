"""/healthz, /readyz and /metrics: unauthenticated, and /readyz follows its dependencies."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database
from disco._dev.ports import free_port
from disco_service import ServiceSettings
from tests.fixtures.waiting import wait_for_status
from tests.integration.kit.support import bearer, build_app, serve


async def test_healthz_answers_without_a_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "service": "service"}


async def test_readyz_is_200_when_database_and_kafka_answer(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert {name: check["ok"] for name, check in body["checks"].items()} == {
        "database": True,
        "kafka": True,
    }


async def test_readyz_flips_to_503_when_the_broker_stops_and_back_when_it_returns(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    broker_factory: Callable[[], EmbeddedBroker],
) -> None:
    broker = broker_factory()
    app = build_app(make_settings(kafka_bootstrap=broker.bootstrap), kit_schema)
    async with serve(app) as http:
        assert (await http.get("/readyz")).status_code == 200

        broker.stop(grace=0.2)  # an outage: no need to wait for Tansu's clients to leave
        down = await wait_for_status(http, "/readyz", 503)
        assert down.json()["error"]["code"] == "unavailable"
        assert down.json()["error"]["details"]["failed"] == ["kafka"]
        assert (await http.get("/healthz")).status_code == 200

        broker.start()
        up = await wait_for_status(http, "/readyz", 200)
        assert up.json()["checks"]["kafka"]["ok"] is True


async def test_readyz_is_503_naming_the_database_when_it_cannot_be_reached(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> None:
    dead = f"postgresql://disco_app:disco_app@127.0.0.1:{free_port()}/disco"
    app = build_app(make_settings(database_url=dead), kit_schema)
    async with serve(app) as http:
        response = await http.get("/readyz")
        liveness = await http.get("/healthz")
    assert response.status_code == 503
    details = response.json()["error"]["details"]
    assert details["failed"] == ["database"]
    assert details["checks"]["kafka"]["ok"] is True
    assert liveness.status_code == 200


async def test_readyz_is_503_while_the_database_is_missing_and_200_once_it_exists(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    postgres_admin_url: str,
) -> None:
    import asyncpg

    name = f"kit_late_{free_port()}"
    app_url = with_database(make_settings().database_url.replace("+asyncpg", ""), name)
    app = build_app(make_settings(database_url=app_url), kit_schema)
    async with serve(app) as http:
        assert (await http.get("/readyz")).status_code == 503
        admin = await asyncpg.connect(with_database(postgres_admin_url, "postgres"))
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
            await admin.execute(f'GRANT CONNECT ON DATABASE "{name}" TO disco_app')
            response = await wait_for_status(http, "/readyz", 200)
        finally:
            await admin.close()
    assert response.json()["checks"]["database"]["ok"] is True


async def test_metrics_count_requests_by_route_template_and_status(
    client: httpx.AsyncClient,
) -> None:
    await client.get("/notes/missing-1", headers=bearer())
    await client.get("/notes/missing-2", headers=bearer())
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    line = 'disco_http_requests_total{method="GET",route="/notes/{note_id}",status="404"} 2.0'
    assert line in response.text.splitlines()
    assert "disco_http_request_duration_seconds_bucket" in response.text
    assert "missing-1" not in response.text


async def test_two_apps_in_one_process_keep_their_own_metrics(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> None:
    first = build_app(make_settings(), kit_schema, database=False, bus=False, outbox=False)
    second = build_app(make_settings(), kit_schema, database=False, bus=False, outbox=False)
    async with serve(first) as one, serve(second) as two:
        await one.get("/healthz")
        await one.get("/healthz")
        await two.get("/healthz")
        first_metrics = (await one.get("/metrics")).text
        second_metrics = (await two.get("/metrics")).text
    healthz = 'disco_http_requests_total{method="GET",route="/healthz",status="200"}'
    assert f"{healthz} 2.0" in first_metrics.splitlines()
    assert f"{healthz} 1.0" in second_metrics.splitlines()


async def test_a_response_echoes_the_request_id_the_client_sent(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz", headers={"X-Request-ID": "req-123"})
    assert response.headers["x-request-id"] == "req-123"


async def test_a_response_carries_a_fresh_request_id_when_the_client_sent_none(
    client: httpx.AsyncClient,
) -> None:
    first = await client.get("/healthz")
    second = await client.get("/healthz")
    assert first.headers["x-request-id"] != second.headers["x-request-id"]
