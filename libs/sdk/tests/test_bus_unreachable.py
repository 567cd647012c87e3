"""A broker that cannot be reached is one clear error, not aiokafka's lines before it."""

from __future__ import annotations

import logging

import pytest

from disco._dev.ports import free_port
from disco.bus import BusClient, BusUnavailableError
from disco.settings import BusSettings


async def test_an_unreachable_broker_is_one_error_naming_the_setting_and_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    settings = BusSettings(kafka_bootstrap=bootstrap, kafka_request_timeout_ms=2000)
    caplog.set_level(logging.INFO)

    with pytest.raises(BusUnavailableError) as refused:
        await BusClient(settings, name="nowhere").start()

    assert bootstrap in str(refused.value)
    assert "DISCO_KAFKA_BOOTSTRAP" in str(refused.value)
    assert "disco dev up" in str(refused.value)
    # aiokafka's own line for the address is kept, at DEBUG only.
    assert not [r for r in caplog.records if r.name == "aiokafka" and r.levelno > logging.DEBUG]


async def test_aiokafkas_bootstrap_failure_shows_when_its_debug_logging_is_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = BusSettings(kafka_bootstrap=f"127.0.0.1:{free_port()}")
    caplog.set_level(logging.DEBUG, logger="aiokafka")

    with pytest.raises(BusUnavailableError):
        await BusClient(settings, name="nowhere").start()

    failures = [r for r in caplog.records if r.getMessage().startswith("Unable connect to")]
    assert failures
    assert {r.levelno for r in failures} == {logging.DEBUG}
