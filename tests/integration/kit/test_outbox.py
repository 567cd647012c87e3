"""Publish after commit: events reach Kafka only for committed transactions, even after a crash."""

# ruff: noqa: S608 - SQL names the scratch schema the fixtures generated, never input

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from disco_common.envelope import BusinessFact, Envelope
from disco_common.topics import Topic, topic_name
from disco_service import Database, ServiceSettings, publish_after_commit
from tests.fixtures.bus import read_envelopes
from tests.fixtures.infra import DatabaseUrls
from tests.integration.kit.app import NOTE_CREATED
from tests.integration.kit.support import bearer, build_app, new_tenant, serve

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def subjects(envelopes: list[Envelope], tenant: str) -> list[str | None]:
    """The subjects of ``tenant``'s notes among ``envelopes``, in topic order.

    The outbox is the session's and a relay publishes every tenant's due rows, so a row
    another test left behind can reach this test's topic too: each test reads its own
    tenant's (one tenant per test).
    """
    return [
        envelope.subject
        for envelope in envelopes
        if envelope.type == NOTE_CREATED and envelope.tenant_id == tenant
    ]


async def outbox_rows(database: DatabaseUrls, schema: str, tenant: str) -> int:
    conn = await asyncpg.connect(database.admin)
    try:
        count = await conn.fetchval(
            f'SELECT count(*) FROM "{schema}".outbox WHERE tenant_id = $1', tenant
        )
    finally:
        await conn.close()
    return int(count)


async def test_a_committed_request_publishes_its_event_with_tenant_and_trace(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    kafka_bootstrap: str,
    database: DatabaseUrls,
) -> None:
    settings = make_settings()
    tenant = new_tenant()
    headers = bearer(tenant)
    headers["traceparent"] = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    async with serve(build_app(settings, kit_schema)) as http:
        created = await http.post("/notes", json={"body": "hello"}, headers=headers)
        note_id = created.json()["id"]
        topic = topic_name(Topic.BUSINESS_FACTS, settings.topic_prefix)
        envelopes = await read_envelopes(
            kafka_bootstrap, topic, lambda seen: note_id in subjects(seen, tenant)
        )
    event = next(e for e in envelopes if e.subject == note_id)
    assert created.status_code == 201
    assert event.tenant_id == tenant
    assert event.traceparent is not None
    assert event.traceparent.split("-")[1] == TRACE_ID
    assert await outbox_rows(database, kit_schema, tenant) == 0


async def test_a_rolled_back_request_publishes_nothing(
    make_settings: Callable[..., ServiceSettings], kit_schema: str, kafka_bootstrap: str
) -> None:
    settings = make_settings()
    tenant = new_tenant()
    headers = bearer(tenant)
    async with serve(build_app(settings, kit_schema)) as http:
        failed = await http.post(
            "/notes", params={"fail_after_publish": "true"}, json={"body": "x"}, headers=headers
        )
        # A later committed event marks the point by which the failed one would
        # have been published: the outbox publishes in commit order.
        marker = await http.post("/notes", json={"body": "marker"}, headers=headers)
        marker_id = marker.json()["id"]
        topic = topic_name(Topic.BUSINESS_FACTS, settings.topic_prefix)
        envelopes = await read_envelopes(
            kafka_bootstrap, topic, lambda seen: marker_id in subjects(seen, tenant)
        )
    assert failed.status_code == 409
    assert subjects(envelopes, tenant) == [marker_id]


async def test_rows_left_by_a_crash_before_publishing_are_swept_on_the_next_start(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    kafka_bootstrap: str,
    database: DatabaseUrls,
) -> None:
    settings = make_settings()
    tenant = new_tenant()
    # A process that committed its outbox rows and died before its relay ran:
    # a bare Database, no relay, no bus.
    crashed = Database(settings, schema=kit_schema)
    try:
        async with crashed.unit_of_work(tenant) as session:
            for n in range(3):
                await publish_after_commit(
                    session,
                    Topic.BUSINESS_FACTS,
                    BusinessFact(source="disco://test", type=NOTE_CREATED, subject=f"orphan-{n}"),
                )
    finally:
        await crashed.dispose()
    assert await outbox_rows(database, kit_schema, tenant) == 3

    async with serve(build_app(settings, kit_schema)):
        topic = topic_name(Topic.BUSINESS_FACTS, settings.topic_prefix)
        envelopes = await read_envelopes(
            kafka_bootstrap, topic, lambda seen: len(subjects(seen, tenant)) == 3
        )

    assert sorted(subjects(envelopes, tenant)) == ["orphan-0", "orphan-1", "orphan-2"]
    assert await outbox_rows(database, kit_schema, tenant) == 0


async def test_events_wait_in_the_outbox_while_the_broker_is_away(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    database: DatabaseUrls,
    broker_factory: Callable[[], object],
) -> None:
    from disco._dev.broker import EmbeddedBroker

    broker = broker_factory()
    assert isinstance(broker, EmbeddedBroker)
    settings = make_settings(kafka_bootstrap=broker.bootstrap)
    tenant = new_tenant()
    async with serve(build_app(settings, kit_schema)) as http:
        broker.stop()
        created = await http.post("/notes", json={"body": "while down"}, headers=bearer(tenant))
        assert created.status_code == 201
        assert await outbox_rows(database, kit_schema, tenant) == 1

        broker.start()
        topic = topic_name(Topic.BUSINESS_FACTS, settings.topic_prefix)
        envelopes = await read_envelopes(
            broker.bootstrap,
            topic,
            lambda seen: created.json()["id"] in subjects(seen, tenant),
            timeout=60,
        )
    assert subjects(envelopes, tenant) == [created.json()["id"]]
    assert await outbox_rows(database, kit_schema, tenant) == 0


async def test_publish_after_commit_refuses_an_envelope_for_another_tenant(
    make_settings: Callable[..., ServiceSettings], kit_schema: str
) -> None:
    import pytest

    database = Database(make_settings(), schema=kit_schema)
    try:
        with pytest.raises(ValueError, match="tenant"):
            async with database.unit_of_work("acme") as session:
                await publish_after_commit(
                    session,
                    Topic.BUSINESS_FACTS,
                    BusinessFact(source="disco://test", type=NOTE_CREATED, tenant_id="globex"),
                )
    finally:
        await database.dispose()


async def test_rows_that_can_never_be_published_are_dropped_and_the_rest_go_in_order(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    kafka_bootstrap: str,
    database: DatabaseUrls,
) -> None:
    settings = make_settings(bus_max_message_bytes=64 * 1024)
    tenant = new_tenant()

    def note(subject: str, data: str = "") -> BusinessFact:
        return BusinessFact(
            source="disco://test",
            type=NOTE_CREATED,
            subject=subject,
            correlation_id=tenant,
            data=data,
        )

    # Rows a process committed before it died: more than one relay batch, one
    # too large for the bus, then one another version wrote that no longer
    # parses as an envelope, then a last good one.
    crashed = Database(settings, schema=kit_schema)
    conn = await asyncpg.connect(database.admin)
    try:
        async with crashed.unit_of_work(tenant) as session:
            for n in range(150):
                body = "x" * (100 * 1024) if n == 40 else ""
                await publish_after_commit(session, Topic.BUSINESS_FACTS, note(f"n-{n}", body))
        await conn.execute(
            f'INSERT INTO "{kit_schema}".outbox (topic, envelope, tenant_id) '
            "VALUES ('business-facts', '{\"type\": \"broken\"}'::jsonb, $1)",
            tenant,
        )
        async with crashed.unit_of_work(tenant) as session:
            await publish_after_commit(session, Topic.BUSINESS_FACTS, note("last"))
    finally:
        await conn.close()
        await crashed.dispose()

    async with serve(build_app(settings, kit_schema)):
        topic = topic_name(Topic.BUSINESS_FACTS, settings.topic_prefix)
        envelopes = await read_envelopes(
            kafka_bootstrap, topic, lambda seen: "last" in subjects(seen, tenant), timeout=30
        )

    expected = [f"n-{n}" for n in range(150) if n != 40] + ["last"]
    # One key (the correlation id), one partition: commit order is topic order.
    assert subjects(envelopes, tenant) == expected
    assert await outbox_rows(database, kit_schema, tenant) == 0
