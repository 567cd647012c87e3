"""The hub's keeper: what sockets saw is stored behind them, in order, with the positions.

A unit test (the database is a stand-in that records each store and holds it
until the test lets it go); the real store, and a gateway killed before it,
are the integration and end-to-end tests' (tests/e2e/gateway/test_session_durability.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest

from disco.settings import BusSettings
from disco_common.envelope import Notification
from disco_gateway.sessions import hub as hub_module
from disco_gateway.sessions.hub import SessionHub
from disco_gateway.sessions.mapping import StoredEvent, to_session_event


def _event(n: int) -> StoredEvent:
    envelope = Notification(
        source="disco://agent/a",
        type="TOOL_LOG",
        data={"type": "TOOL_LOG", "payload": {"message": f"line {n}"}},
        session_id="s1",
        tenant_id="acme",
    )
    event = to_session_event(envelope, max_bytes=64 * 1024)
    assert event is not None
    return event


class _Database:
    """Records each store; a store waits until ``release`` is set."""

    def __init__(self) -> None:
        self.stores: list[tuple[list[str], dict[tuple[str, int], int]]] = []
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    @contextlib.asynccontextmanager
    async def unit_of_work(self, tenant: str | None) -> AsyncIterator[_Database]:
        yield self

    async def store(
        self,
        session: Any,
        rows: Sequence[dict[str, Any]],
        positions: Mapping[tuple[str, int], int] | None = None,
    ) -> int:
        self.entered.set()
        await self.release.wait()
        self.stores.append(([str(row["event_id"]) for row in rows], dict(positions or {})))
        return len(rows)


async def _forever() -> None:
    await asyncio.Event().wait()


@pytest.fixture
async def kept(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[SessionHub, _Database]]:
    database = _Database()
    monkeypatch.setattr(hub_module, "store_batch", database.store)
    hub = SessionHub(BusSettings(), database, max_payload_bytes=64 * 1024)  # type: ignore[arg-type]
    # Running as after start(), without a broker: caught up, a keeper, a (stand-in) reader.
    hub._caught_up_at = 0
    hub._keeper = asyncio.create_task(hub._keep())
    hub._task = asyncio.create_task(_forever())
    try:
        yield hub, database
    finally:
        for task in (hub._task, hub._keeper):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_settled_waits_for_every_event_handed_out_and_stores_keep_reading_order(
    kept: tuple[SessionHub, _Database],
) -> None:
    hub, database = kept
    first, second, third = [_event(n) for n in range(3)], [_event(3)], [_event(n) for n in (4, 5)]
    await hub._hand(first, {("t.notification-events", 0): 3})
    await database.entered.wait()  # the keeper holds the first batch in its store
    await hub._hand(second, {("t.notification-events", 1): 1})
    await hub._hand(third, {("t.notification-events", 0): 5})
    settled = asyncio.create_task(hub.settled())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not settled.done()  # handed to sockets, not stored yet: a replay would wait

    database.release.set()

    assert await settled is True
    assert database.stores == [
        ([e.id for e in first], {("t.notification-events", 0): 3}),
        (
            [e.id for e in second + third],
            {("t.notification-events", 1): 1, ("t.notification-events", 0): 5},
        ),
    ]
    assert await hub.settled() is True  # nothing handed since: at once


async def test_settled_waits_for_the_catch_up_after_a_start(
    kept: tuple[SessionHub, _Database],
) -> None:
    hub, database = kept
    database.release.set()
    hub._caught_up_at = None  # still reading what was published before the start
    settled = asyncio.create_task(hub.settled())
    event = _event(0)
    await hub._hand([event], {("t.notification-events", 0): 1})
    for _ in range(20):
        await asyncio.sleep(0)
    assert not settled.done()

    async with hub._progress:
        hub._caught_up_at = hub._handed
        hub._progress.notify_all()

    assert await settled is True
    assert database.stores == [([event.id], {("t.notification-events", 0): 1})]
