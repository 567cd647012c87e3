"""Plan context: a Planner saves its state machine; an answer finds it by correlation id."""

from __future__ import annotations

import httpx

from disco_common.plans import PlanContextData
from tests.integration.memory.conftest import error_code, new_id


def plan_context(plan_id: str, *correlation_ids: str) -> dict[str, object]:
    context = PlanContextData(
        plan_id=plan_id,
        goal_event="research.goal",
        response_event="research.done",
        correlation_ids=list(correlation_ids),
        state={"step": 1},
    )
    return {"context": context.model_dump(mode="json")}


async def test_a_saved_plan_context_is_found_by_its_correlation_ids(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan, correlation = new_id("plan"), new_id("corr")
    await client.put(
        f"/v1/memory/plan-context/{plan}", json=plan_context(plan, correlation), headers=alice
    )

    by_id = await client.get(f"/v1/memory/plan-context/{plan}", headers=alice)
    by_correlation = await client.get(
        f"/v1/memory/plan-context/by-correlation/{correlation}", headers=alice
    )

    assert by_id.json()["context"]["state"] == {"step": 1}
    assert by_correlation.json()["plan_id"] == plan
    assert by_correlation.json()["correlation_ids"] == [correlation]


async def test_an_answered_correlation_id_no_longer_finds_the_plan(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan, answered, pending = new_id("plan"), new_id("corr"), new_id("corr")
    url = f"/v1/memory/plan-context/{plan}"
    await client.put(url, json=plan_context(plan, answered, pending), headers=alice)

    await client.put(
        url, json={**plan_context(plan, pending), "expected_version": 1}, headers=alice
    )

    gone = await client.get(f"/v1/memory/plan-context/by-correlation/{answered}", headers=alice)
    kept = await client.get(f"/v1/memory/plan-context/by-correlation/{pending}", headers=alice)
    assert gone.status_code == 404
    assert kept.json()["version"] == 2


async def test_a_stale_plan_context_save_is_a_conflict(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    url = f"/v1/memory/plan-context/{plan}"
    await client.put(url, json=plan_context(plan), headers=alice)
    await client.put(url, json=plan_context(plan), headers=alice)

    stale = await client.put(url, json={**plan_context(plan), "expected_version": 1}, headers=alice)
    absent_only = await client.put(
        url, json={**plan_context(plan), "expected_version": 0}, headers=alice
    )

    assert [stale.status_code, absent_only.status_code] == [409, 409]
    assert stale.json()["error"]["details"]["current_version"] == 2


async def test_a_correlation_id_of_another_plan_is_a_conflict(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    first, second, shared = new_id("plan"), new_id("plan"), new_id("corr")
    await client.put(
        f"/v1/memory/plan-context/{first}", json=plan_context(first, shared), headers=alice
    )

    clash = await client.put(
        f"/v1/memory/plan-context/{second}", json=plan_context(second, shared), headers=alice
    )

    assert clash.status_code == 409
    assert error_code(clash) == "correlation_claimed"


async def test_a_deleted_plan_context_is_gone_with_its_correlations(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan, correlation = new_id("plan"), new_id("corr")
    await client.put(
        f"/v1/memory/plan-context/{plan}", json=plan_context(plan, correlation), headers=alice
    )

    deleted = await client.delete(f"/v1/memory/plan-context/{plan}", headers=alice)

    assert deleted.status_code == 204
    lookup = await client.get(
        f"/v1/memory/plan-context/by-correlation/{correlation}", headers=alice
    )
    assert lookup.status_code == 404


async def test_another_tenant_cannot_read_or_overwrite_a_plan_context(
    client: httpx.AsyncClient, alice: dict[str, str], stranger: dict[str, str]
) -> None:
    plan, correlation = new_id("plan"), new_id("corr")
    url = f"/v1/memory/plan-context/{plan}"
    await client.put(url, json=plan_context(plan, correlation), headers=alice)

    read = await client.get(url, headers=stranger)
    by_correlation = await client.get(
        f"/v1/memory/plan-context/by-correlation/{correlation}", headers=stranger
    )
    guarded_write = await client.put(
        url, json={**plan_context(plan), "expected_version": 1}, headers=stranger
    )

    assert [read.status_code, by_correlation.status_code, guarded_write.status_code] == [
        404,
        404,
        409,
    ]
    assert (await client.get(url, headers=alice)).json()["correlation_ids"] == [correlation]
