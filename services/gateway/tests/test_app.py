"""The gateway skeleton: its settings and an app that connects to nothing until started."""

from __future__ import annotations

import pytest

from disco_gateway import GatewaySettings, create_app
from disco_service import get_state, settings_env_vars


def test_the_gateway_listens_on_8080_by_default() -> None:
    assert GatewaySettings().port == 8080


def test_the_gateway_port_comes_from_its_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_GATEWAY_PORT", "9080")
    monkeypatch.setenv("DISCO_PORT", "1")
    assert GatewaySettings().port == 9080
    assert "DISCO_PORT" not in settings_env_vars(GatewaySettings)


def test_the_gateway_app_serves_health_readiness_and_metrics_and_owns_its_schema() -> None:
    app = create_app(GatewaySettings())
    paths = set(app.openapi()["paths"])
    assert {"/healthz", "/readyz", "/metrics"} <= paths
    state = get_state(app)
    assert state.schema == "gateway"
    assert state.database is None  # nothing connects before the lifespan starts


def test_the_gateway_serves_cards_the_publish_bridge_and_both_a2a_bindings() -> None:
    app = create_app(GatewaySettings())
    paths = set(app.openapi()["paths"])
    routes = {getattr(route, "path", "") for route in app.routes}

    assert {
        "/.well-known/agent-card.json",
        "/a2a/{agent}/.well-known/agent-card.json",
        "/.well-known/jwks.json",
    } <= paths
    assert "/v1/publish" in paths
    assert {"/a2a", "/a2a/{agent}", "/a2a/message:send", "/a2a/tasks/{id}"} <= routes
    assert "/a2a/{agent}" in {
        getattr(r, "path", "") for r in app.routes if type(r).__name__ == "Mount"
    }
    assert "UI session streams" not in app.description
