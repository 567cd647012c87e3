"""What `disco dev up` hands each service in its environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from disco._dev.services import select_services
from disco._dev.settings import DevSettings
from disco._dev.stack import DevStack


def gateway_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> dict[str, str]:
    monkeypatch.setenv("DISCO_STATE_DIR", str(tmp_path))
    for name in (
        "DISCO_ENV",
        "DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK",
        "DISCO_GATEWAY_CARD_SIGNING_KEY",
        "DISCO_GATEWAY_CARD_SIGNING_KEY_FILE",
        "DISCO_GATEWAY_GRPC_PORT",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (gateway,) = select_services(["gateway"])
    return DevStack(DevSettings(), echo=lambda _: None).service_env(gateway)


def test_a_dev_gateway_may_push_to_a_webhook_on_this_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert gateway_env(monkeypatch, tmp_path)["DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK"] == "true"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK": "false"}, "false"),
        ({"DISCO_ENV": "production"}, None),
    ],
)
def test_a_setting_of_ones_own_or_another_environment_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], expected: str | None
) -> None:
    assert gateway_env(monkeypatch, tmp_path, **env).get("DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK") == (
        expected
    )


def test_a_dev_gateway_signs_its_cards_with_one_key_kept_with_the_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = gateway_env(monkeypatch, tmp_path)["DISCO_GATEWAY_CARD_SIGNING_KEY_FILE"]
    pem = Path(first).read_bytes()
    again = gateway_env(monkeypatch, tmp_path)["DISCO_GATEWAY_CARD_SIGNING_KEY_FILE"]

    assert Path(first).parent == tmp_path.resolve()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert Path(first).stat().st_mode & 0o777 == 0o600
    assert (again, Path(again).read_bytes()) == (first, pem)  # made once


def test_a_signing_key_of_ones_own_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = gateway_env(monkeypatch, tmp_path, DISCO_GATEWAY_CARD_SIGNING_KEY="-----BEGIN ...")

    assert "DISCO_GATEWAY_CARD_SIGNING_KEY_FILE" not in env
    assert not list(tmp_path.glob("*.pem"))


def test_a_dev_gateway_serves_grpc_on_8090_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert gateway_env(monkeypatch, tmp_path)["DISCO_GATEWAY_GRPC_PORT"] == "8090"
    told = gateway_env(monkeypatch, tmp_path, DISCO_GATEWAY_GRPC_PORT="9999")
    assert told["DISCO_GATEWAY_GRPC_PORT"] == "9999"
