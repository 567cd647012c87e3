"""``GET /v1/asyncapi`` on the real registry and Postgres: the AsyncAPI 3.0 document of a
tenant's bus, checked by the official AsyncAPI parser, kept to its tenant, and with an
ETag that changes exactly when the document does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest_asyncio
import yaml
from asgi_lifespan import LifespanManager

from disco.clients import RegistryClient
from disco_common.asyncapi import AsyncApiFormat
from disco_common.registry import PayloadSchemaCreate, Visibility
from disco_registry import RegistrySettings, create_app
from disco_registry.state import RegistryState
from tests.fixtures.asyncapi import AsyncApiParser
from tests.fixtures.bus_agents import (
    ORDER_SHIPPED_V1,
    ORDER_SHIPPED_V2,
    carriers,
    planner,
    register_bus,
    ttl,
)
from tests.fixtures.waiting import eventually
from tests.integration.registry.support import assert_error, bearer, new_tenant, unique

HOUR = 3600.0


async def document(http: httpx.AsyncClient, tenant: str, **params: str) -> httpx.Response:
    response = await http.get("/v1/asyncapi", params=params, headers=bearer(tenant))
    assert response.status_code == 200, response.text
    return response


def operations_of(doc: dict[str, Any], agent: str) -> dict[str, dict[str, Any]]:
    return {
        key: op for key, op in doc["operations"].items() if op["x-disco-agent"]["name"] == agent
    }


def refs(items: list[dict[str, str]]) -> list[str]:
    return [item["$ref"] for item in items]


async def test_the_official_parser_finds_no_error_in_a_tool_a_worker_and_a_planner(
    http: httpx.AsyncClient,
    make_client: Callable[..., RegistryClient],
    asyncapi_parser: AsyncApiParser,
    topic_prefix: str,
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)

    as_json = (await document(http, tenant)).content
    as_yaml = (await document(http, tenant, format="yaml")).content

    for text in (as_json, as_yaml):
        parsed = asyncapi_parser.parse(text)
        assert parsed.parsed
        assert parsed.errors == [], "\n".join(map(str, parsed.errors))
    doc = json.loads(as_json)
    assert yaml.safe_load(as_yaml) == doc
    assert doc["asyncapi"] == "3.0.0"
    assert doc["info"]["x-disco-tenant"] == tenant

    # Every topic and its dead letters, with the environment's prefix.
    channels = doc["channels"]
    for topic in ("action-requests", "action-results", "business-facts", "system-events"):
        assert channels[topic]["address"] == f"{topic_prefix}{topic}"
        assert channels[f"{topic}.dlq"]["address"] == f"{topic_prefix}{topic}.dlq"
    assert "quote.requested" in channels["action-requests"]["messages"]

    # Request/reply: each version of the Tool receives the request and answers on
    # action-results; the newer one's answer is its own event type.
    tool_ops = operations_of(doc, names["tool"])
    receive = tool_ops[f"{names['tool']}.v1.1.0.receive.quote.requested"]
    assert receive["action"] == "receive"
    assert receive["x-disco-agent"]["version"] == "1.1.0"
    assert receive["bindings"]["kafka"]["groupId"]["enum"] == [f"{topic_prefix}{names['tool']}"]
    assert refs(receive["reply"]["messages"]) == ["#/channels/action-results/messages/quote.priced"]
    older = tool_ops[f"{names['tool']}.v1.0.0.receive.quote.requested"]
    assert refs(older["reply"]["messages"]) == [
        "#/channels/action-results/messages/quote.completed"
    ]

    # Fan-out: the Worker sends the Tool's request (with the Tool's answers as its
    # reply), receives the answers it asked for, and reports progress.
    worker_ops = operations_of(doc, names["worker"])
    sends = worker_ops[f"{names['worker']}.v2.1.0.send.quote.requested"]
    assert sends["action"] == "send"
    assert sends["reply"]["channel"] == {"$ref": "#/channels/action-results"}
    assert worker_ops[f"{names['worker']}.v2.1.0.receive.quote.answered"]["action"] == "receive"
    progress = worker_ops[f"{names['worker']}.v2.1.0.send.task.progress"]
    assert progress["channel"] == {"$ref": "#/channels/system-events"}

    # The system-events emitter: the Planner's plan events carry the platform's schema,
    # its business fact the registered schema version it names.
    planner_ops = operations_of(doc, names["planner"])
    assert {op["action"] for op in planner_ops.values()} == {"receive", "send"}
    messages = doc["components"]["messages"]
    assert messages["plan.started"]["x-disco-schema"]["source"] == "platform"
    shipped = messages["order.shipped"]
    assert shipped["x-disco-schema"] == {
        "$id": "urn:disco:schema:order.shipped@1.0.0",
        "name": "order.shipped",
        "version": "1.0.0",
        "source": "registered",
        "owner": {"agent": names["planner"], "version": "0.1.0"},
    }
    schema = doc["components"]["schemas"][shipped["payload"]["$ref"].rsplit("/", 1)[1]]
    assert schema["$id"] == "urn:disco:schema:order.shipped@1.0.0"
    assert [e["payload"] for e in shipped["examples"]] == ORDER_SHIPPED_V1["examples"]

    # The request's payload is the registered JSON Schema (the newer version's), its
    # nested model reachable inside the document, and only the example that fits it.
    request = messages["quote.requested"]
    assert request["x-disco-schema"]["owner"] == {"agent": names["tool"], "version": "1.1.0"}
    payload = doc["components"]["schemas"][request["payload"]["$ref"].rsplit("/", 1)[1]]
    assert payload["required"] == ["carrier", "kg"]
    assert payload["properties"]["to"]["anyOf"][0]["$ref"].startswith(
        request["payload"]["$ref"] + "/$defs/"
    )
    assert [example["payload"] for example in request["examples"]] == [
        {"carrier": "swift", "kg": 2.5, "to": {"city": "Lisbon"}}
    ]


async def test_another_tenant_sees_none_of_the_agents_or_schemas(
    http: httpx.AsyncClient, make_client: Callable[..., RegistryClient]
) -> None:
    owner, other = new_tenant(), new_tenant()
    async with make_client(owner) as client:
        names = await register_bus(client)
    async with make_client(other) as client:
        await client.create_schema(
            PayloadSchemaCreate(name="other.fact", version="3.0.0", json_schema={"type": "object"})
        )

    theirs = (await document(http, other)).text
    mine = (await document(http, owner)).text

    for name in names.values():
        assert name in mine
        assert name not in theirs
    assert "order.shipped" in mine
    assert "order.shipped" not in theirs
    assert "quote.requested" not in theirs
    assert "other.fact_3.0.0" in theirs
    assert "other.fact" not in mine
    assert json.loads(theirs)["info"]["x-disco-tenant"] == other


async def test_a_public_agent_is_on_every_tenants_bus(
    http: httpx.AsyncClient, make_client: Callable[..., RegistryClient]
) -> None:
    owner, other = new_tenant(), new_tenant()
    name = unique("public-carriers")
    async with make_client(owner) as client:
        registration = carriers(name).registration()
        record = await client.register(
            ttl(registration.model_copy(update={"visibility": Visibility.PUBLIC}))
        )
        try:
            doc = (await document(http, other, agent=name)).json()
        finally:
            # A public agent is on every tenant's bus: the module's other tests share them.
            await client.deregister(record.agent_id)

    (op,) = [op for op in doc["operations"].values() if op["action"] == "receive"]
    assert op["x-disco-agent"]["tenant"] == owner
    assert op["x-disco-agent"]["visibility"] == "public"


async def test_a_new_schema_version_appears_and_changes_the_etag(
    http: httpx.AsyncClient, make_client: Callable[..., RegistryClient]
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)
        first = await document(http, tenant)
        again = await document(http, tenant)
        assert again.headers["etag"] == first.headers["etag"]  # nothing changed

        # A new version of the schema is part of the bus at once...
        await client.create_schema(
            PayloadSchemaCreate(name="order.shipped", version="2.0.0", json_schema=ORDER_SHIPPED_V2)
        )
        published = await document(http, tenant)
        assert published.headers["etag"] != first.headers["etag"]
        schemas = published.json()["components"]["schemas"]
        assert schemas["order.shipped_2.0.0"]["$id"] == "urn:disco:schema:order.shipped@2.0.0"
        message = published.json()["components"]["messages"]["order.shipped"]
        assert message["x-disco-schema"]["version"] == "1.0.0"

        # ...and the message follows it once the planner registers with it.
        await client.register(ttl(planner(names["planner"], schema_version="2.0.0").registration()))
        adopted = await document(http, tenant)

    assert adopted.headers["etag"] not in {first.headers["etag"], published.headers["etag"]}
    message = adopted.json()["components"]["messages"]["order.shipped"]
    assert message["x-disco-schema"]["version"] == "2.0.0"
    assert message["payload"] == {"$ref": "#/components/schemas/order.shipped_2.0.0"}


async def test_an_expired_agent_disappears_and_changes_the_etag(
    http: httpx.AsyncClient, make_client: Callable[..., RegistryClient]
) -> None:
    tenant = new_tenant()
    short_lived = unique("flaky")
    async with make_client(tenant) as client:
        await register_bus(client)
        await client.register(ttl(carriers(short_lived).registration(), seconds=5))
    with_it = await document(http, tenant)
    assert short_lived in with_it.text

    # No heartbeat comes: its last instance expires, and the kept document with it.
    async def gone() -> bool:
        response = await document(http, tenant)
        return short_lived not in response.text

    await eventually(gone, timeout=30, interval=0.5, what="the expired agent gone")
    without = await document(http, tenant)
    assert without.headers["etag"] != with_it.headers["etag"]
    assert "quote.requested" in without.json()["components"]["messages"]  # the others stay


async def test_if_none_match_with_the_current_etag_is_a_304_and_yaml_has_its_own(
    http: httpx.AsyncClient, make_client: Callable[..., RegistryClient]
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        await register_bus(client)
        fetched = await client.asyncapi()
        assert fetched is not None
        assert await client.asyncapi(if_none_match=fetched.etag) is None
        as_yaml = await client.asyncapi(format=AsyncApiFormat.YAML)
        assert as_yaml is not None
        assert as_yaml.is_yaml
        assert as_yaml.etag != fetched.etag
        assert as_yaml.as_dict() == fetched.as_dict()

    by_accept = await http.get(
        "/v1/asyncapi", headers={**bearer(tenant), "Accept": "application/yaml"}
    )
    assert by_accept.headers["content-type"].startswith("application/yaml")
    assert by_accept.headers["etag"] == as_yaml.etag
    assert by_accept.headers["vary"] == "Accept, Authorization"
    not_modified = await http.get(
        "/v1/asyncapi",
        headers={**bearer(tenant), "If-None-Match": f'"nope", W/{fetched.etag}'},
    )
    assert not_modified.status_code == 304
    assert not_modified.content == b""
    assert not_modified.headers["etag"] == fetched.etag
    # Another tenant's copy of the same ETag matches nothing of its own.
    elsewhere = await http.get(
        "/v1/asyncapi", headers={**bearer(new_tenant()), "If-None-Match": fetched.etag}
    )
    assert elsewhere.status_code == 200


async def test_filters_narrow_the_document_to_an_agent_or_an_event_type(
    http: httpx.AsyncClient,
    make_client: Callable[..., RegistryClient],
    asyncapi_parser: AsyncApiParser,
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)

    worker = (await document(http, tenant, agent=names["worker"])).json()
    fact = (await document(http, tenant, event_type="order.shipped")).json()

    assert {op["x-disco-agent"]["name"] for op in worker["operations"].values()} == {
        names["worker"]
    }
    assert worker["info"]["x-disco-filter"] == {"agent": names["worker"], "event_type": None}
    # The messages its operations use, the answers its requests get included.
    assert {"shipping.requested", "quote.requested", "quote.answered", "task.progress"} <= set(
        worker["components"]["messages"]
    )
    assert "order.shipped" not in worker["components"]["messages"]
    assert "business-facts" not in worker["channels"]

    assert set(fact["channels"]) == {"business-facts", "business-facts.dlq"}
    assert [op["x-disco-agent"]["name"] for op in fact["operations"].values()] == [names["planner"]]
    for narrowed in (worker, fact):
        parsed = asyncapi_parser.parse(narrowed)
        assert parsed.errors == [], "\n".join(map(str, parsed.errors))


async def test_an_unknown_agent_or_event_type_is_a_404_naming_the_live_agents(
    http: httpx.AsyncClient, make_client: Callable[..., RegistryClient]
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)

    unknown = await http.get("/v1/asyncapi", params={"agent": "nobody"}, headers=bearer(tenant))
    error = assert_error(unknown, 404, "agent_not_found")
    assert names["worker"] in error["message"]
    assert names["worker"] in error["details"]["live_agents"]
    assert_error(
        await http.get("/v1/asyncapi", params={"event_type": "no.such"}, headers=bearer(tenant)),
        404,
        "event_not_found",
    )
    for params in ({"format": "xml"}, {"agent": "not a name"}, {"colour": "blue"}):
        bad = await http.get("/v1/asyncapi", params=params, headers=bearer(tenant))
        assert_error(bad, 422, "validation_failed")
    assert_error(await http.get("/v1/asyncapi"), 401)


@pytest_asyncio.fixture(loop_scope="module")
async def two_instances(
    make_settings: Callable[..., RegistrySettings],
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, RegistryState]]:
    """Two more registry instances on the module's database, keeping documents an hour."""
    apps = [create_app(make_settings(asyncapi_cache_seconds=HOUR)) for _ in range(2)]
    async with (
        LifespanManager(apps[0], startup_timeout=30, shutdown_timeout=30) as first,
        LifespanManager(apps[1], startup_timeout=30, shutdown_timeout=30) as second,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=first.app), base_url="http://one.test"
        ) as one,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=second.app), base_url="http://two.test"
        ) as two,
    ):
        state = RegistryState.of(apps[0])
        await eventually(lambda: state.asyncapi_cache.trusted, what="listening for changes")
        yield one, two, state


async def test_a_kept_document_ends_when_another_instance_registers_or_adds_a_schema(
    two_instances: tuple[httpx.AsyncClient, httpx.AsyncClient, RegistryState],
) -> None:
    one, two, state = two_instances
    tenant = new_tenant()
    name = unique("carriers")
    registered = await two.post(
        "/v1/agents",
        content=ttl(carriers(name).registration()).model_dump_json(),
        headers={**bearer(tenant), "content-type": "application/json"},
    )
    assert registered.status_code == 201, registered.text

    async def kept_on_one() -> bool:
        served = state.asyncapi_cache.served
        await document(one, tenant)
        return state.asyncapi_cache.served > served

    await eventually(kept_on_one, timeout=10, what="the document kept by the first instance")
    before = (await document(one, tenant)).headers["etag"]

    newer = await two.post(
        "/v1/agents",
        content=ttl(carriers(name, version="9.0.0").registration()).model_dump_json(),
        headers={**bearer(tenant), "content-type": "application/json"},
    )
    assert newer.status_code == 201, newer.text

    async def sees_the_new_version() -> bool:
        return "9.0.0" in (await document(one, tenant)).text

    await eventually(sees_the_new_version, timeout=10, what="the other instance's write heard")
    after_register = (await document(one, tenant)).headers["etag"]
    assert after_register != before

    schema = await two.post(
        "/v1/schemas",
        json={"name": "late.fact", "version": "1.0.0", "json_schema": {"type": "object"}},
        headers=bearer(tenant),
    )
    assert schema.status_code == 201, schema.text

    async def sees_the_schema() -> bool:
        return "late.fact_1.0.0" in (await document(one, tenant)).text

    await eventually(sees_the_schema, timeout=10, what="the other instance's schema heard")


async def test_odd_names_remote_references_and_bad_examples_still_make_a_valid_document(
    http: httpx.AsyncClient,
    make_client: Callable[..., RegistryClient],
    asyncapi_parser: AsyncApiParser,
) -> None:
    tenant = new_tenant()
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://schemas.example.com/invoice.json",
        "type": "object",
        "properties": {
            "customer": {"$ref": "https://schemas.example.com/customer.json"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            "total": {"$ref": "invoice.json#/$defs/Money"},
            "note": {"$ref": "#annotated"},
        },
        "required": ["total"],
        "$defs": {
            "Line": {"type": "object", "properties": {"sku": {"type": "string"}}},
            "Money": {"type": "number", "minimum": 0},
        },
        "examples": [{"total": -1}, {"total": 12.5, "lines": [{"sku": "a"}]}],
    }
    body = {
        "agent_id": unique("billing"),
        "name": unique("billing.v2"),
        "version": "2.0.0-rc.1+build.5",
        "events": [
            {
                "event_type": "billing:invoice/created",
                "topic": "billing-facts",
                "json_schema": schema,
            }
        ],
        "ttl_seconds": 600,
    }
    registered = await http.post("/v1/agents", json=body, headers=bearer(tenant))
    assert registered.status_code == 201, registered.text

    response = await document(http, tenant)

    parsed = asyncapi_parser.parse(response.content)
    assert parsed.errors == [], "\n".join(map(str, parsed.errors))
    doc = response.json()
    assert doc["channels"]["billing-facts"]["address"].endswith("billing-facts")
    message = doc["components"]["messages"]["billing_invoice_created"]
    assert message["name"] == "billing:invoice/created"
    payload = doc["components"]["schemas"][message["payload"]["$ref"].rsplit("/", 1)[1]]
    properties = payload["properties"]
    # Nothing is fetched: a reference to another document is kept as a note; the
    # schema's own references point into the document.
    assert properties["customer"] == {
        "x-disco-unresolved-ref": "https://schemas.example.com/customer.json"
    }
    assert properties["total"]["$ref"].endswith("/$defs/Money")
    assert properties["lines"]["items"]["$ref"].endswith("/$defs/Line")
    assert "$schema" not in payload
    assert [e["payload"] for e in message["examples"]] == [{"total": 12.5, "lines": [{"sku": "a"}]}]
