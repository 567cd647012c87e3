"""How the console writes times: how long ago, or how long until."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from disco_gateway.console.endpoints import _ago


@pytest.mark.parametrize(
    ("offset", "shown"),
    [
        (timedelta(seconds=-5), "5s ago"),
        (timedelta(seconds=-90), "1m ago"),
        (timedelta(hours=-3), "3h ago"),
        (timedelta(days=-2), "2d ago"),
        (timedelta(seconds=40), "in 39s"),
        (timedelta(minutes=59, seconds=59), "in 59m"),
        (timedelta(hours=2, seconds=30), "in 2h"),
    ],
)
def test_a_time_reads_as_how_long_ago_or_how_long_until(offset: timedelta, shown: str) -> None:
    assert _ago(datetime.now(UTC) + offset) == shown


def test_no_time_reads_as_a_dash() -> None:
    assert _ago(None) == "—"
