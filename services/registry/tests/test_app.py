"""The registry skeleton: its settings and an app that connects to nothing until started."""

from __future__ import annotations

import pytest

from disco_registry import RegistrySettings, create_app
from disco_service import get_state, settings_env_vars


def test_the_registry_listens_on_8081_by_default() -> None:
    assert RegistrySettings().port == 8081


def test_the_registry_port_comes_from_its_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_REGISTRY_PORT", "9081")
    monkeypatch.setenv("DISCO_PORT", "1")
    assert RegistrySettings().port == 9081
    assert "DISCO_PORT" not in settings_env_vars(RegistrySettings)


def test_the_registry_app_serves_health_readiness_and_metrics_and_owns_its_schema() -> None:
    app = create_app(RegistrySettings())
    paths = set(app.openapi()["paths"])
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    state = get_state(app)
    assert state.schema == "registry"
    assert state.database is None  # nothing connects before the lifespan starts
