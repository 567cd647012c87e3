"""``BusSettings``: environment variables, defaults that work, refusals that explain."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from disco.settings import BusSettings


def test_every_setting_has_a_working_local_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DISCO_KAFKA_BOOTSTRAP", "DISCO_TOPIC_PREFIX"):
        monkeypatch.delenv(name, raising=False)

    settings = BusSettings()

    assert settings.kafka_bootstrap == "127.0.0.1:9092"
    assert settings.topic_prefix == ""
    assert settings.kafka_connection_options()["security_protocol"] == "PLAINTEXT"


def test_settings_are_read_from_disco_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISCO_KAFKA_BOOTSTRAP", "kafka:9092")
    monkeypatch.setenv("DISCO_TOPIC_PREFIX", "staging.")
    monkeypatch.setenv("DISCO_BUS_RETRY_ATTEMPTS", "5")

    settings = BusSettings()

    assert (settings.kafka_bootstrap, settings.topic_prefix, settings.bus_retry_attempts) == (
        "kafka:9092",
        "staging.",
        5,
    )


def test_a_topic_prefix_kafka_cannot_use_is_refused() -> None:
    with pytest.raises(ValidationError, match="topic prefix"):
        BusSettings(topic_prefix="no spaces/please")


def test_sasl_without_credentials_is_refused_naming_the_variables() -> None:
    with pytest.raises(ValidationError, match="DISCO_KAFKA_SASL_USERNAME"):
        BusSettings(kafka_security_protocol="SASL_PLAINTEXT")


def test_sasl_credentials_reach_the_kafka_options() -> None:
    settings = BusSettings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="SCRAM-SHA-256",
        kafka_sasl_username="agent",
        kafka_sasl_password="s3cret",
    )

    options = settings.kafka_connection_options()

    assert options["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("agent", "s3cret")
    assert "s3cret" not in repr(settings)


def test_a_heartbeat_as_long_as_the_session_is_refused() -> None:
    with pytest.raises(ValidationError, match="heartbeat"):
        BusSettings(kafka_session_timeout_ms=1000, kafka_heartbeat_interval_ms=1000)
