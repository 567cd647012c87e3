"""The bus checks every action-requests payload with the installed validator before publishing."""

from __future__ import annotations

from typing import Any

import pytest

from disco.bus import BusClient, BusNotStartedError
from disco.settings import BusSettings


class Refused(ValueError):
    pass


async def refuse(event_type: str, data: Any) -> None:
    raise Refused(f"{event_type}: {data!r} breaks the schema")


async def test_a_request_refused_by_the_validator_fails_before_anything_is_sent() -> None:
    bus = BusClient(BusSettings(kafka_bootstrap="127.0.0.1:1"))
    bus.set_request_validator(refuse)

    with pytest.raises(Refused, match=r"calc\.requested"):
        await bus.request("calc.requested", {"x": 1}, response_event="calc.done")


async def test_facts_are_not_validated() -> None:
    bus = BusClient(BusSettings(kafka_bootstrap="127.0.0.1:1"))
    bus.set_request_validator(refuse)

    # Reaches the producer (not started here) instead of the validator.
    with pytest.raises(BusNotStartedError):
        await bus.announce("order.placed", {"x": 1})


async def test_removing_the_validator_lets_requests_through_to_the_producer() -> None:
    bus = BusClient(BusSettings(kafka_bootstrap="127.0.0.1:1"))
    bus.set_request_validator(refuse)
    bus.set_request_validator(None)

    with pytest.raises(BusNotStartedError):
        await bus.request("calc.requested", {"x": 1}, response_event="calc.done")
