"""The gateway's settings and the push URL policy."""

from __future__ import annotations

import pytest

from disco_gateway import GatewaySettings
from disco_gateway.push.urls import push_url_policy


def test_public_agents_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_AGENTS", "hello, assistant ,")
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_URL", "https://agents.example.com")

    settings = GatewaySettings()

    assert settings.gateway_public_agents == ("hello", "assistant")
    assert settings.is_public_agent("hello")
    assert not settings.is_public_agent("secret")
    assert settings.gateway_public_url == "https://agents.example.com"


@pytest.mark.parametrize("setting", [{"push_allow_loopback": True}, {"card_visibility": "all"}])
def test_dev_only_settings_are_refused_in_production(setting: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="dev"):
        GatewaySettings(env="production", auth_secret="x" * 40, **setting)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "loopback", "accepted"),
    [
        ("http://127.0.0.1:9000/hook", True, True),
        ("http://127.0.0.1:9000/hook", False, False),
        ("http://localhost/hook", True, True),
        ("http://10.0.0.7/hook", True, False),
        ("http://192.168.1.1/hook", True, False),
        ("http://169.254.169.254/latest/meta-data", True, False),
        ("http://[::1]:8080/hook", True, True),
        ("file:///etc/passwd", True, False),
        ("http://93.184.216.34/hook", False, True),
    ],
)
async def test_push_urls_go_to_public_addresses_or_loopback_when_allowed(
    url: str, loopback: bool, accepted: bool
) -> None:
    assert await push_url_policy(allow_loopback=loopback)(url) is accepted
