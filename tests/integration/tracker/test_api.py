"""The tracker's read API: tenancy, filters, pages, errors, plan types, the typed client."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.clients import ServiceConflictError, ServiceValidationError, StaticToken, TrackerClient
from disco_common.ids import utcnow
from disco_common.plans import PlanDefinition, StateAction, StateConfig, StateTransition
from tests.integration.tracker.read_model_support import TrackerApp, auth, tracker_fixture
from tests.integration.tracker.scenario import Scenario, plan_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

tracker = tracker_fixture()

TRIP = PlanDefinition(
    plan_type="trip",
    description="Quote shipping, then book.",
    states=[
        StateConfig(state_name="start", default_next="quoting"),
        StateConfig(
            state_name="quoting",
            action=StateAction(
                event_type="shipping.quote.requested", response_event="shipping.quoted"
            ),
            transitions=[StateTransition(on_event="shipping.quoted", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ],
)


def _assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code


async def _run(tracker: TrackerApp, tenant: str, **kwargs: Any) -> Scenario:
    scenario = plan_scenario(tenant, start=kwargs.pop("start", utcnow() - timedelta(minutes=5)))
    await tracker.publish(scenario.envelopes)
    await tracker.wait_for_plan(
        tenant, scenario.plan_id, lambda v: v["plan"]["task_counts"].get("completed") == 4
    )
    return scenario


def _client(tracker: TrackerApp, tenant: str) -> TrackerClient:
    token = StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "alice"))
    return TrackerClient(tracker.url, token=token)


async def test_another_tenant_reads_nothing_of_a_tenants_plans(tracker: TrackerApp) -> None:
    owner, other = tracker.new_tenant("owner"), tracker.new_tenant("other")
    scenario = await _run(tracker, owner)
    plan = scenario.plan_id

    for path in (
        f"/v1/tracker/plans/{plan}",
        f"/v1/tracker/plans/{plan}/tasks",
        f"/v1/tracker/plans/{plan}/timeline",
        f"/v1/tracker/plans/{plan}/tree",
        f"/v1/tracker/tasks/{scenario.action_task_id}",
        f"/v1/tracker/delegations/{scenario.group_id}",
    ):
        response = await tracker.get(path, other)
        assert response.status_code == 404, path
    assert (await tracker.json("/v1/tracker/plans", other))["items"] == []
    assert (await tracker.json("/v1/tracker/metrics/agents", other))["items"] == []
    assert (await tracker.json("/v1/tracker/metrics/event-types", other))["items"] == []
    # ...while the owner sees it all.
    owned = await tracker.json("/v1/tracker/plans", owner, root_only=True)
    assert [p["plan_id"] for p in owned["items"]] == [plan]


async def test_every_route_wants_a_token(tracker: TrackerApp) -> None:
    for path in ("/v1/tracker/plans", "/v1/tracker/metrics/agents", "/v1/tracker/plan-types"):
        _assert_error(await tracker.http.get(path), 401, "unauthenticated")


async def test_unknown_ids_are_404_with_specific_codes(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    for path, code in (
        ("/v1/tracker/plans/nope", "plan_not_found"),
        ("/v1/tracker/plans/nope/tasks", "plan_not_found"),
        ("/v1/tracker/plans/nope/timeline", "plan_not_found"),
        ("/v1/tracker/plans/nope/tree", "plan_not_found"),
        ("/v1/tracker/tasks/nope", "task_not_found"),
        ("/v1/tracker/delegations/nope", "delegation_not_found"),
        ("/v1/tracker/plan-types/nope", "plan_type_not_found"),
    ):
        _assert_error(await tracker.get(path, tenant), 404, code)


async def test_plans_page_newest_first_and_filter(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    now = utcnow()
    runs = [await _run(tracker, tenant, start=now - timedelta(minutes=30 - i)) for i in range(3)]
    newest_first = [r.plan_id for r in reversed(runs)]

    first = await tracker.json("/v1/tracker/plans", tenant, root_only=True, limit=2)
    second = await tracker.json(
        "/v1/tracker/plans", tenant, root_only=True, limit=2, cursor=first["next_cursor"]
    )
    assert [p["plan_id"] for p in first["items"] + second["items"]] == newest_first
    assert second["next_cursor"] is None

    async def ids(**filters: Any) -> list[str]:
        page = await tracker.json("/v1/tracker/plans", tenant, **filters)
        return [p["plan_id"] for p in page["items"]]

    assert await ids(plan_type="trip") == newest_first
    assert await ids(agent_name="trip-planner") == newest_first
    assert await ids(agent_name="carriers") == newest_first  # did tasks in each
    assert await ids(agent_name="packing-planner") == [r.sub_plan_id for r in reversed(runs)]
    assert await ids(status="running") == []
    assert await ids(root_only=True, started_after=runs[1].started.isoformat()) == [
        runs[2].plan_id,
        runs[1].plan_id,
    ]
    assert await ids(root_only=True, started_before=runs[1].started.isoformat()) == [
        runs[0].plan_id
    ]


async def test_a_cursor_of_other_filters_or_garbage_is_refused(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    for _ in range(2):
        await _run(tracker, tenant)
    page = await tracker.json("/v1/tracker/plans", tenant, limit=1)

    _assert_error(
        await tracker.get("/v1/tracker/plans", tenant, cursor="not-a-cursor"), 400, "invalid_cursor"
    )
    _assert_error(
        await tracker.get(
            "/v1/tracker/plans", tenant, limit=1, plan_type="trip", cursor=page["next_cursor"]
        ),
        400,
        "invalid_cursor",
    )
    _assert_error(
        await tracker.get("/v1/tracker/plan-types", tenant, cursor=page["next_cursor"]),
        400,
        "invalid_cursor",
    )
    _assert_error(
        await tracker.get("/v1/tracker/plans", tenant, status="exploded"), 422, "validation_failed"
    )
    _assert_error(
        await tracker.get("/v1/tracker/metrics/agents", tenant, window_seconds=0),
        422,
        "validation_failed",
    )


async def test_metrics_count_agents_and_event_types_with_percentiles(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    await _run(tracker, tenant)
    await _run(tracker, tenant)

    agents = {
        a["agent_name"]: a
        for a in (await tracker.json("/v1/tracker/metrics/agents", tenant))["items"]
    }
    events = {
        (e["event_type"], e["topic"]): e
        for e in (await tracker.json("/v1/tracker/metrics/event-types", tenant))["items"]
    }

    assert set(agents) == {"carriers", "shipping-broker", "trip-planner"}
    carriers = agents["carriers"]
    assert (carriers["count"], carriers["errors"], carriers["in_progress"]) == (6, 0, 0)
    assert (
        0
        < carriers["p50_duration_ms"]
        <= carriers["p95_duration_ms"]
        <= carriers["p99_duration_ms"]
    )
    assert agents["shipping-broker"]["mean_duration_ms"] == pytest.approx(4.0)
    quotes = events[("carrier.quote.requested", "action-requests")]
    assert (quotes["count"], quotes["error_count"]) == (6, 0)
    assert quotes["p99_duration_ms"] > 0
    assert events[("task.started", "system-events")]["count"] == 2
    assert events[("carrier.quoted", "action-results")]["p50_duration_ms"] is None


async def test_a_plan_type_version_is_registered_once_and_immutable(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    body = {"plan": TRIP.model_dump(mode="json"), "version": "1.0.0"}
    changed = TRIP.model_copy(update={"description": "Changed."}).model_dump(mode="json")

    created = await tracker.http.post("/v1/tracker/plan-types", json=body, headers=auth(tenant))
    again = await tracker.http.post("/v1/tracker/plan-types", json=body, headers=auth(tenant))
    conflict = await tracker.http.post(
        "/v1/tracker/plan-types",
        json={"plan": changed, "version": "1.0.0"},
        headers=auth(tenant),
    )
    newer = await tracker.http.post(
        "/v1/tracker/plan-types", json={"plan": changed, "version": "1.1.0"}, headers=auth(tenant)
    )
    broken = await tracker.http.post(
        "/v1/tracker/plan-types",
        json={"plan": {"plan_type": "x", "states": {"start": {"state_name": "start"}}}},
        headers=auth(tenant),
    )

    assert (created.status_code, again.status_code, newer.status_code) == (201, 200, 201)
    assert created.json() == again.json()
    _assert_error(conflict, 409, "plan_type_version_conflict")
    _assert_error(broken, 422, "validation_failed")
    latest = await tracker.json("/v1/tracker/plan-types/trip", tenant)
    first = await tracker.json("/v1/tracker/plan-types/trip", tenant, version="1.0.0")
    assert (latest["version"], latest["definition"]["description"]) == ("1.1.0", "Changed.")
    assert first["definition"]["description"] == TRIP.description
    listing = await tracker.json("/v1/tracker/plan-types", tenant)
    assert [(t["plan_type"], t["version"]) for t in listing["items"]] == [("trip", "1.1.0")]
    assert (await tracker.json("/v1/tracker/plan-types", tracker.new_tenant()))["items"] == []


async def test_the_plan_view_shows_its_registered_state_machine(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    async with _client(tracker, tenant) as client:
        await client.register_plan_type(TRIP, version="1.0.0")
        await client.register_plan_type(
            TRIP.model_copy(update={"description": "Later."}), version="2.0.0"
        )
        scenario = await _run(tracker, tenant)

        view = await client.get_plan(scenario.plan_id)

    assert view is not None
    assert view.definition is not None
    assert view.definition.version == "1.0.0"  # the version the plan started with
    assert set(view.definition.definition.states) == {"start", "quoting", "done"}
    assert view.plan.current_state in view.definition.definition.states


async def test_the_client_reads_plans_tasks_timelines_trees_groups_and_metrics(
    tracker: TrackerApp,
) -> None:
    tenant = tracker.new_tenant()
    scenario = await _run(tracker, tenant)

    async with _client(tracker, tenant) as client:
        plans = [p async for p in client.iter_plans(root_only=True, limit=1)]
        tasks = [t async for t in client.iter_plan_tasks(scenario.plan_id)]
        timeline = [e async for e in client.iter_timeline(scenario.plan_id)]
        tree = await client.plan_tree(scenario.plan_id)
        group = await client.get_delegation(scenario.group_id)
        task = await client.get_task(scenario.action_task_id)
        agents = await client.agent_metrics(window_seconds=3600)
        events = await client.event_type_metrics()
        missing = await client.get_plan("nope")
        with pytest.raises(ServiceValidationError) as refused:
            await client.list_plans(cursor="garbage")
        await client.register_plan_type(TRIP, version="1.0.0")
        other = TRIP.model_copy(update={"description": "other"})
        with pytest.raises(ServiceConflictError):
            await client.register_plan_type(other, version="1.0.0")

    assert [p.plan_id for p in plans] == [scenario.plan_id]
    assert [t.task_id for t in tasks] == [scenario.action_task_id, *scenario.sub_task_ids]
    assert [e.event_id for e in timeline] == [e.id for e in scenario.of_plan()]
    assert tree is not None
    assert [c.plan_id for c in tree.children] == [scenario.sub_plan_id]
    assert group is not None
    assert (group.completed, group.pending) == (3, 0)
    assert task is not None
    assert [s.sub_task_id for s in task.sub_tasks] == scenario.sub_task_ids
    assert task.delegations == [scenario.group_id]
    assert {a.agent_name for a in agents.items} == {"carriers", "shipping-broker", "trip-planner"}
    assert any(e.event_type == "plan.started" for e in events.items)
    assert missing is None
    assert refused.value.code == "invalid_cursor"
