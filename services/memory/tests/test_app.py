"""The memory skeleton: its settings and an app that connects to nothing until started."""

from __future__ import annotations

import pytest

from disco_memory import MemorySettings, create_app
from disco_service import get_state, settings_env_vars


def test_the_memory_listens_on_8082_by_default() -> None:
    assert MemorySettings().port == 8082


def test_the_memory_port_comes_from_its_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_MEMORY_PORT", "9082")
    monkeypatch.setenv("DISCO_PORT", "1")
    assert MemorySettings().port == 9082
    assert "DISCO_PORT" not in settings_env_vars(MemorySettings)


def test_the_memory_app_serves_health_readiness_and_metrics_and_owns_its_schema() -> None:
    app = create_app(MemorySettings())
    paths = set(app.openapi()["paths"])
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    state = get_state(app)
    assert state.schema == "memory"
    assert state.database is None  # nothing connects before the lifespan starts


def test_the_memory_api_has_every_family_with_declared_errors() -> None:
    spec = create_app(MemorySettings()).openapi()
    families = {path.split("/")[3] for path in spec["paths"] if path.startswith("/v1/memory/")}

    assert families == {
        "working",
        "task-context",
        "plan-context",
        "plans",
        "sessions",
        "semantic",
        "episodic",
        "procedural",
        "snapshots",
        "dedup",
        "steps",
        "erasure",
    }
    working_put = spec["paths"]["/v1/memory/working/{plan_id}/{key}"]["put"]["responses"]
    assert {"409", "413"} <= set(working_put)
    assert working_put["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "ErrorResponse"
    )
    by_subtask = spec["paths"]["/v1/memory/task-context/by-subtask/{sub_task_id}"]["get"]
    assert "404" in by_subtask["responses"]


def test_the_memory_accepts_bodies_big_enough_for_a_full_snapshot() -> None:
    assert MemorySettings().max_body_bytes >= 9 * 1024 * 1024
