"""``python -m disco_<service>`` serves the app on its configured port and stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from disco._dev.ports import free_port
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.waiting import wait_for_http


@pytest.fixture
def registry_process(
    database: DatabaseUrls, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port()
    log_path = tmp_path / "registry.log"
    env = {
        **os.environ,
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_REGISTRY_PORT": str(port),
        "DISCO_DATABASE_URL": database.app,
        "DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "DISCO_TOPIC_PREFIX": topic_prefix,
        "DISCO_LOG_JSON": "true",
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "disco_registry"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield process, port, log_path
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_python_m_disco_registry_serves_health_and_readiness_and_stops_on_sigterm(
    registry_process: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    process, port, log_path = registry_process
    base = f"http://127.0.0.1:{port}"

    health = wait_for_http(f"{base}/healthz", process=process)
    ready = wait_for_http(f"{base}/readyz", process=process)
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
