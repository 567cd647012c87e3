"""The session events the gateway keeps for replay: each tenant's own, bounded by age and count."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
from sqlalchemy import text

from disco_common.envelope import Notification
from disco_common.ids import utcnow
from disco_gateway.sessions.mapping import to_session_event
from disco_gateway.sessions.repository import (
    SessionEventRepository,
    forget_positions,
    purge,
    store_batch,
    stream_positions,
)
from disco_service import Database
from tests.fixtures.infra import DatabaseUrls
from tests.integration.gateway.conftest import new_tenant


def _rows(tenant: str, session: str, count: int) -> list[dict[str, object]]:
    rows = []
    for n in range(count):
        event = to_session_event(
            Notification(
                source="disco://agent/a",
                type="TOOL_LOG",
                data={"type": "TOOL_LOG", "payload": {"message": f"line {n}"}},
                session_id=session,
                tenant_id=tenant,
            ),
            max_bytes=64 * 1024,
        )
        assert event is not None
        rows.append(event.row())
    return rows


async def _kept(db: Database, tenant: str, session: str) -> list[str]:
    async with db.unit_of_work(tenant) as connection:
        rows = await SessionEventRepository(connection, tenant).after(
            session, 0, limit=100, user_id="alice", all_users=True
        )
    return [document["id"] for _, document in rows]


async def test_retention_drops_old_events_and_all_but_the_newest_of_each_session(
    db: Database,
) -> None:
    tenant, other = new_tenant(), new_tenant()
    busy, quiet = f"s-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    busy_rows, quiet_rows = _rows(tenant, busy, 6), _rows(tenant, quiet, 2)
    others = _rows(other, busy, 2)  # another tenant, the same session id
    async with db.unit_of_work(None) as connection:
        stored = await store_batch(connection, busy_rows + quiet_rows + others)
        again = await store_batch(connection, busy_rows[:2])  # a second instance's copy
    async with db.unit_of_work(tenant) as connection:
        await connection.execute(
            text(
                "UPDATE gateway.session_events SET created_at = now() - interval '40 days' "
                "WHERE event_id = ANY(:ids)"
            ),
            {"ids": [row["event_id"] for row in busy_rows[:1]]},
        )
    before = await _kept(db, tenant, busy)
    async with db.unit_of_work(None) as connection:
        purged = await purge(connection, cutoff=utcnow() - timedelta(days=30), keep=3)

    ids = [str(row["event_id"]) for row in busy_rows]
    assert stored == 10
    assert again == 0
    assert before == ids
    assert purged >= 3  # one too old, then two past the newest three
    assert await _kept(db, tenant, busy) == ids[3:]
    assert await _kept(db, tenant, quiet) == [str(row["event_id"]) for row in quiet_rows]
    assert await _kept(db, other, busy) == [str(row["event_id"]) for row in others]
    async with db.unit_of_work(tenant) as connection:
        assert await SessionEventRepository(connection, tenant).seq_of(busy, ids[0]) is None


async def test_the_readers_positions_are_kept_with_the_events_and_never_go_back(
    db: Database,
) -> None:
    tenant, session = new_tenant(), f"s-{uuid.uuid4().hex[:8]}"
    topic = f"t{uuid.uuid4().hex[:6]}.notification-events"
    other_topic = f"{topic}.other"
    rows = _rows(tenant, session, 3)
    async with db.unit_of_work(None) as connection:
        await store_batch(connection, rows[:2], {(topic, 0): 7, (topic, 1): 3})
        # A second instance behind the first: its older positions change nothing.
        await store_batch(connection, rows[:1], {(topic, 0): 5, (topic, 2): 1})
        await store_batch(connection, [], {(topic, 1): 4})  # a position alone
        await store_batch(connection, rows[2:], {(other_topic, 0): 9})
    async with db.unit_of_work(None) as connection:
        positions = await stream_positions(connection, [topic])

    assert positions == {(topic, 0): 7, (topic, 1): 4, (topic, 2): 1}
    assert await _kept(db, tenant, session) == [str(row["event_id"]) for row in rows]


async def test_positions_of_topics_no_instance_reads_are_forgotten_once_idle(
    db: Database, database: DatabaseUrls
) -> None:
    run = uuid.uuid4().hex[:6]
    ours, gone, busy = (f"{run}{name}.notification-events" for name in ("ours", "gone", "busy"))
    async with db.unit_of_work(None) as connection:
        await store_batch(connection, [], {(ours, 0): 3, (gone, 0): 5, (gone, 1): 2, (busy, 0): 8})
    # Two of them last advanced a day ago (the application role cannot write the table).
    admin = await asyncpg.connect(database.admin)
    try:
        await admin.execute(
            "UPDATE gateway.session_stream_positions SET updated_at = now() - interval '1 day' "
            "WHERE topic = ANY($1)",
            [ours, gone],
        )
    finally:
        await admin.close()

    async with db.unit_of_work(None) as connection:
        forgotten = await forget_positions(
            connection, keep=[ours], cutoff=utcnow() - timedelta(hours=1)
        )
    async with db.unit_of_work(None) as connection:
        left = await stream_positions(connection, [ours, gone, busy])

    assert forgotten == 2  # both partitions of the idle topic no instance reads
    assert left == {(ours, 0): 3, (busy, 0): 8}  # ours however idle; another, still advancing
