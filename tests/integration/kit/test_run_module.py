"""``python -m disco_<service>`` serves the app on its configured port and stops cleanly."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.processes import ServiceProcess, launch_service, wait_until_serving


@pytest.fixture
def registry_process(
    database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> Iterator[ServiceProcess]:
    env = {
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_DATABASE_URL": database.app,
        "DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "DISCO_TOPIC_PREFIX": topic_prefix,
        "DISCO_LOG_JSON": "true",
    }
    service = launch_service("registry", env, tmp_path / "registry.log")
    try:
        yield service
    finally:
        if service.process.poll() is None:
            service.process.kill()
            service.process.wait(10)


def test_python_m_disco_registry_serves_health_and_readiness_and_stops_on_sigterm(
    registry_process: ServiceProcess,
) -> None:
    process, log_path = registry_process.process, registry_process.log

    wait_until_serving(process, registry_process.url, log_path)  # /readyz answered 200
    health = httpx.get(f"{registry_process.url}/healthz")
    ready = httpx.get(f"{registry_process.url}/readyz")
    process.send_signal(signal.SIGTERM)
    code = process.wait(30)

    assert health.json() == {"status": "ok", "service": "registry"}
    assert ready.json()["checks"]["database"]["ok"] is True
    # uvicorn re-raises the signal once its graceful shutdown is done, as a
    # well-behaved process does: exit status "terminated by SIGTERM".
    assert code in (0, -signal.SIGTERM)
    lines = log_path.read_text().splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    logged = [event["event"] for event in events]
    assert {"service_started", "service_stopping", "Application shutdown complete."} <= set(logged)
    assert all(event["service"] == "registry" for event in events)
