"""Discovery answers kept by a registry instance never outlive what they describe: a
write on this instance, a write on another, SQL by hand, an instance's expiry and a
lost listening connection each end them (two instances, one real database)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest_asyncio
from asgi_lifespan import LifespanManager

from disco_registry import RegistrySettings, create_app
from disco_registry.discovery.cache import DiscoveryCache
from disco_registry.state import RegistryState
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.waiting import eventually
from tests.integration.registry.support import (
    bearer,
    capability,
    new_tenant,
    register,
    registration,
    sql,
    unique,
)

BASE_URL = "http://registry.test"
# Answers would be kept an hour: only a change (or an expiry) can end them here.
HOUR = 3600.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def instances(
    make_settings: Callable[..., RegistrySettings],
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache]]:
    """Two registry instances on the module's database: clients of each, and the first's
    discovery cache."""
    apps = [create_app(make_settings(discovery_cache_seconds=HOUR)) for _ in range(2)]
    async with (
        LifespanManager(apps[0], startup_timeout=30, shutdown_timeout=30) as first,
        LifespanManager(apps[1], startup_timeout=30, shutdown_timeout=30) as second,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=first.app), base_url=BASE_URL) as one,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=second.app), base_url=BASE_URL) as two,
    ):
        cache = RegistryState.of(apps[0]).discovery_cache
        await eventually(lambda: cache.trusted, what="the first instance listening")
        yield one, two, cache


async def names(http: httpx.AsyncClient, tenant: str, task: str) -> list[str]:
    response = await http.get("/v1/discover", params={"capability": task}, headers=bearer(tenant))
    assert response.status_code == 200, response.text
    return sorted(agent["name"] for agent in response.json())


def agent(task: str, **overrides: Any) -> dict[str, Any]:
    return registration(capabilities=[capability(task)], **overrides)


async def served_from_cache(
    http: httpx.AsyncClient, cache: DiscoveryCache, tenant: str, task: str
) -> None:
    """Until a repeated discovery is answered from the cache. Tries again when another
    test's public agent (this database is shared) dropped every answer in between."""

    async def repeated_from_cache() -> bool:
        await names(http, tenant, task)
        served = cache.served
        await names(http, tenant, task)
        return cache.served > served

    await eventually(repeated_from_cache, timeout=10, what="an answer served from the cache")


async def test_an_answer_is_kept_and_a_write_on_the_same_instance_ends_it_at_once(
    instances: tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache],
) -> None:
    one, _, cache = instances
    tenant, task = new_tenant(), unique("task")
    first = agent(task)
    await register(one, tenant, first)
    assert await names(one, tenant, task) == [first["name"]]
    await served_from_cache(one, cache, tenant, task)

    second = agent(task)
    await register(one, tenant, second)
    assert await names(one, tenant, task) == sorted([first["name"], second["name"]])

    gone = await one.delete(f"/v1/agents/{first['agent_id']}", headers=bearer(tenant))
    assert gone.status_code == 204
    assert await names(one, tenant, task) == [second["name"]]


async def test_a_registration_on_another_instance_reaches_the_kept_answer(
    instances: tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache],
) -> None:
    one, two, _ = instances
    tenant, task = new_tenant(), unique("task")
    first, second = agent(task), agent(task)
    await register(two, tenant, first)
    assert await names(one, tenant, task) == [first["name"]]

    await register(two, tenant, second)

    expected = sorted([first["name"], second["name"]])
    await discovers(one, tenant, task, expected, "the other instance's registration")


async def test_an_expiry_written_in_sql_by_hand_reaches_the_kept_answer(
    instances: tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache],
    database: DatabaseUrls,
) -> None:
    one, _, _ = instances
    tenant, task = new_tenant(), unique("task")
    record = await register(one, tenant, agent(task))
    assert await names(one, tenant, task) == [record["name"]]

    await expire_in(database, tenant, record["agent_id"], -1.0)

    await discovers(one, tenant, task, [], "the agent gone")


async def test_a_kept_answer_ends_when_its_first_instance_expires_with_no_write(
    instances: tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache],
    database: DatabaseUrls,
) -> None:
    one, _, _ = instances
    tenant, task = new_tenant(), unique("task")
    record = await register(one, tenant, agent(task))
    # Due in two seconds: nothing is written when that time comes (the sweeper only
    # removes the instance afterwards, which changes no answer and notifies nobody).
    await expire_in(database, tenant, record["agent_id"], 2.0)
    await discovers(one, tenant, task, [record["name"]], "the answer with the instance due soon")

    await discovers(one, tenant, task, [], "the agent expired")


async def test_nothing_is_kept_while_the_listening_connection_is_lost(
    instances: tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache],
    database: DatabaseUrls,
) -> None:
    one, two, cache = instances
    tenant, task = new_tenant(), unique("task")
    first = await register(one, tenant, agent(task))
    assert await names(one, tenant, task) == [first["name"]]

    # Every registry instance's listening connection on this database ends (each
    # listens on its own pooled connection and comes back within a second).
    await sql(
        database.admin,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'disco-registry' AND query LIKE 'LISTEN%'",
    )
    await eventually(lambda: not cache.trusted, timeout=10, what="the loss noticed")
    assert cache.size_bytes == 0
    second = await register(two, tenant, agent(task))
    assert await names(one, tenant, task) == sorted([first["name"], second["name"]])
    # Not kept while deaf (unless listening already came back, a second after the loss).
    assert cache.size_bytes == 0 or cache.trusted

    await eventually(lambda: cache.trusted, timeout=10, what="listening again")
    assert await names(one, tenant, task) == sorted([first["name"], second["name"]])
    await served_from_cache(one, cache, tenant, task)


async def discovers(
    http: httpx.AsyncClient, tenant: str, task: str, expected: list[str], what: str
) -> None:
    """Until discovery by ``task`` answers the agent names ``expected``."""

    async def answered() -> bool:
        return await names(http, tenant, task) == expected

    await eventually(answered, timeout=10, what=what)


async def expire_in(database: DatabaseUrls, tenant: str, agent_id: str, seconds: float) -> None:
    """Make the agent's instances expire ``seconds`` from now (by hand, in SQL)."""
    await sql(
        database.admin,
        "UPDATE registry.agent_instances SET expires_at = now() + make_interval(secs => $3) "
        "WHERE tenant_id = $1 AND agent_id = $2",
        tenant,
        agent_id,
        seconds,
    )


async def test_metrics_say_where_answers_came_from_and_whether_the_instance_listens(
    instances: tuple[httpx.AsyncClient, httpx.AsyncClient, DiscoveryCache],
) -> None:
    one, _, cache = instances
    tenant, task = new_tenant(), unique("task")
    await register(one, tenant, agent(task))
    await eventually(lambda: cache.trusted, timeout=10, what="listening")
    before = cache.served, cache.asked
    for _ in range(3):
        await names(one, tenant, task)

    text = (await one.get("/metrics")).text

    served, asked = cache.served - before[0], cache.asked - before[1]
    # Kept after the first (unless another test's public agent dropped every answer).
    assert (served + asked, asked >= 1, served >= 1 or asked == 3) == (3, True, True)
    assert f'disco_registry_discovery_answers_total{{source="cache"}} {cache.served}.0' in text
    assert f'disco_registry_discovery_answers_total{{source="database"}} {cache.asked}.0' in text
    assert "disco_registry_discovery_cache_listening 1.0" in text
    # The size moves with other tests' notifications: it is there, and a count.
    assert re.search(r"^disco_registry_discovery_cache_bytes \d+\.0$", text, re.MULTILINE)
