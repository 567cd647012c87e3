"""The tracker skeleton: its settings and an app that connects to nothing until started."""

from __future__ import annotations

import pytest

from disco_service import get_state, settings_env_vars
from disco_tracker import TrackerSettings, create_app


def test_the_tracker_listens_on_8083_by_default() -> None:
    assert TrackerSettings().port == 8083


def test_the_tracker_port_comes_from_its_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_TRACKER_PORT", "9083")
    monkeypatch.setenv("DISCO_PORT", "1")
    assert TrackerSettings().port == 9083
    assert "DISCO_PORT" not in settings_env_vars(TrackerSettings)


def test_the_tracker_app_serves_health_readiness_and_metrics_and_owns_its_schema() -> None:
    app = create_app(TrackerSettings())
    paths = set(app.openapi()["paths"])
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    state = get_state(app)
    assert state.schema == "tracker"
    assert state.database is None  # nothing connects before the lifespan starts
