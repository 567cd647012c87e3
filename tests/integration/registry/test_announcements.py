"""``agent.registered`` as the registration statement writes it (registry_0006): the
same envelope the kit's ``publish_after_commit`` wrote, published after commit, and
nothing for a registration that was refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from disco_common.envelope import Envelope
from disco_common.system_events import AgentRegisteredData
from disco_common.topics import Topic, topic_name
from disco_registry.agents.events import SOURCE
from disco_service.migration_helpers import load_migration
from tests.fixtures.bus import read_envelopes
from tests.fixtures.infra import DatabaseUrls
from tests.integration.registry.support import (
    OBJECT_SCHEMA,
    assert_error,
    bearer,
    capability,
    new_tenant,
    register,
    registration,
    unique,
)

ROOT = Path(__file__).resolve().parents[3]
_MIGRATION = load_migration(ROOT / "migrations/registry/versions/0006_registry_register_as.py")


def _registered(envelopes: list[Envelope], agent_id: str) -> list[Envelope]:
    return [e for e in envelopes if e.type == "agent.registered" and e.subject == agent_id]


async def _announcements(
    kafka_bootstrap: str, topic_prefix: str, agent_ids: list[str]
) -> list[Envelope]:
    return await read_envelopes(
        kafka_bootstrap,
        topic_name(Topic.SYSTEM_EVENTS, topic_prefix),
        lambda seen: all(_registered(seen, agent_id) for agent_id in agent_ids),
        timeout=30,
    )


def _assert_announces(envelope: Envelope, tenant: str, record: dict[str, Any]) -> None:
    assert envelope.source == SOURCE
    assert envelope.tenant_id == tenant
    # Exactly the data the kit path published: the record's fields (none left out
    # as null), its expiry as pydantic writes it.
    expected = {
        "agent_id": record["agent_id"],
        "name": record["name"],
        "instance_id": record["instance_id"],
        "version": record["version"],
        "capabilities": [cap["task_name"] for cap in record["capabilities"]],
        "expires_at": record["expires_at"],
    }
    assert envelope.data == {key: value for key, value in expected.items() if value is not None}


async def test_a_registration_announces_its_record_after_commit(
    http: httpx.AsyncClient, kafka_bootstrap: str, topic_prefix: str
) -> None:
    tenant = new_tenant()
    inline = await register(
        http, tenant, capabilities=[capability("add"), capability("sub")], instance_id=None
    )
    name = unique("order")
    published = await http.post(
        "/v1/schemas",
        json={"name": name, "version": "1.0.0", "json_schema": OBJECT_SCHEMA},
        headers=bearer(tenant),
    )
    assert published.status_code == 201, published.text
    by_ref = await register(
        http,
        tenant,
        capabilities=[capability("mul", request_ref={"name": name, "version": "1.0.0"})],
    )

    envelopes = await _announcements(
        kafka_bootstrap, topic_prefix, [inline["agent_id"], by_ref["agent_id"]]
    )

    for record in (inline, by_ref):
        [announced] = _registered(envelopes, record["agent_id"])
        _assert_announces(announced, tenant, record)


async def test_a_refused_registration_announces_nothing(
    http: httpx.AsyncClient, kafka_bootstrap: str, topic_prefix: str
) -> None:
    tenant = new_tenant()
    other_topic = capability("sub", request_type="calc.requested")
    other_topic["consumed_event"]["topic"] = "other-requests"
    conflicting = registration(
        capabilities=[capability("add", request_type="calc.requested"), other_topic]
    )
    unknown_ref = registration(
        capabilities=[capability("mul", request_ref={"name": unique("none"), "version": "1.0.0"})]
    )

    refused = [
        await http.post("/v1/agents", json=body, headers=bearer(tenant))
        for body in (conflicting, unknown_ref)
    ]
    accepted = await register(http, tenant)
    envelopes = await _announcements(kafka_bootstrap, topic_prefix, [accepted["agent_id"]])

    assert_error(refused[0], 422, "conflicting_event_definition")
    assert_error(refused[1], 422, "unknown_schema_ref")
    assert not _registered(envelopes, conflicting["agent_id"])
    assert not _registered(envelopes, unknown_ref["agent_id"])
    listed = await http.get("/v1/agents", headers=bearer(tenant))
    assert [agent["agent_id"] for agent in listed.json()["items"]] == [accepted["agent_id"]]


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 25, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 11, 25, 3, 4, 5, 120000, tzinfo=UTC),
        datetime(2026, 11, 25, 3, 4, 5, 5, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
async def test_the_statement_writes_the_expiry_as_pydantic_does(
    database: DatabaseUrls, moment: datetime
) -> None:
    expected = AgentRegisteredData(
        agent_id="a", name="n", version="1.0.0", capabilities=[], expires_at=moment
    ).model_dump(mode="json")["expires_at"]
    conn = await asyncpg.connect(database.admin)
    try:
        # Another session time zone than UTC: the text must not depend on it.
        await conn.execute("SET TIME ZONE 'America/New_York'")
        written = await conn.fetchval(
            f"SELECT ({_MIGRATION._EXPIRES_AT_JSON}) #>> '{{}}' "  # noqa: S608 - fixed text
            "FROM (SELECT CAST($1 AS timestamptz) AS expires_at) r",
            moment,
        )
    finally:
        await conn.close()

    assert written == expected
