"""The tracker builds its read model from what runs on the bus (real broker, real Postgres).

The envelopes are those the SDK publishes for a planner whose action asks a
worker that fans out to three carriers (:mod:`tests.integration.tracker.scenario`).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from disco.bus import DlqHeader
from disco_common.ids import utcnow
from disco_common.topics import Topic, dlq_topic, topic_name
from tests.fixtures.bus import read_records
from tests.integration.tracker.read_model_support import TrackerApp, eventually, tracker_fixture
from tests.integration.tracker.scenario import Scenario, plan_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

tracker = tracker_fixture()


def _recent_scenario(tenant: str) -> Scenario:
    # Recent times: the metrics windows reach back from now.
    return plan_scenario(tenant, start=utcnow() - timedelta(minutes=5))


def _counter(tracker: TrackerApp, name: str, **labels: str) -> float:
    return tracker.state.metrics.registry.get_sample_value(f"{name}_total", labels) or 0.0


async def _settled(tracker: TrackerApp, before: tuple[float, float], published: int) -> None:
    """Until the ingest saw ``published`` more envelopes (applied or skipped as duplicates)."""

    async def seen() -> float:
        applied = _counter(tracker, "disco_tracker_ingested_envelopes")
        skipped = _counter(tracker, "disco_tracker_duplicate_envelopes")
        return applied + skipped - before[0] - before[1]

    await eventually(seen, lambda n: n >= published)


def _counters(tracker: TrackerApp) -> tuple[float, float]:
    return (
        _counter(tracker, "disco_tracker_ingested_envelopes"),
        _counter(tracker, "disco_tracker_duplicate_envelopes"),
    )


async def _published_and_applied(tracker: TrackerApp, scenario: Scenario) -> None:
    before = _counters(tracker)
    await tracker.publish(scenario.envelopes)
    await _settled(tracker, before, len(scenario.envelopes))


async def _snapshot(tracker: TrackerApp, scenario: Scenario) -> dict[str, Any]:
    """Everything the API says about the scenario's plan (arrival order left out)."""
    tenant, plan = scenario.tenant, scenario.plan_id
    timeline = await tracker.json(f"/v1/tracker/plans/{plan}/timeline", tenant, limit=200)
    for entry in timeline["items"]:
        entry.pop("sequence")  # the order of arrival, which is what differs
    events = await tracker.json("/v1/tracker/metrics/event-types", tenant, limit=200)
    agents = await tracker.json("/v1/tracker/metrics/agents", tenant, limit=200)
    for item in [*events["items"], *agents["items"]]:
        for key in ("window_start", "window_end"):
            item.pop(key)
    return {
        "plan": await tracker.json(f"/v1/tracker/plans/{plan}", tenant),
        "tasks": await tracker.json(f"/v1/tracker/plans/{plan}/tasks", tenant, limit=200),
        "tree": await tracker.json(f"/v1/tracker/plans/{plan}/tree", tenant),
        "timeline": timeline,
        "group": await tracker.json(f"/v1/tracker/delegations/{scenario.group_id}", tenant),
        "action": await tracker.json(f"/v1/tracker/tasks/{scenario.action_task_id}", tenant),
        "goal": await tracker.json(f"/v1/tracker/tasks/{scenario.goal_task_id}", tenant),
        "event_types": events,
        "agents": agents,
    }


async def test_a_plan_shows_its_state_tasks_agents_and_outcome(tracker: TrackerApp) -> None:
    scenario = _recent_scenario(tracker.new_tenant())
    await _published_and_applied(tracker, scenario)

    view = await tracker.json(f"/v1/tracker/plans/{scenario.plan_id}", scenario.tenant)

    plan = view["plan"]
    assert (plan["status"], plan["current_state"]) == ("completed", "done")
    assert (plan["plan_type"], plan["plan_type_version"]) == ("trip", "1.0.0")
    assert plan["agent_name"] == "trip-planner"
    assert plan["goal_task_id"] == scenario.goal_task_id
    assert plan["task_counts"] == {"completed": 4}
    assert plan["sub_plan_count"] == 1
    assert plan["duration_ms"] > 0
    assert [(m["from_state"], m["to_state"]) for m in view["transitions"]] == [
        (None, "start"),
        ("start", "quoting"),
        ("quoting", "done"),
    ]
    assert view["transitions"][-1]["trigger_event"] == "shipping.quoted"


async def test_the_ingest_fetches_no_faster_than_it_lingers(tracker: TrackerApp) -> None:
    # A batch waits for more envelopes that long anyway; shorter fetches would only
    # cost the broker and the tracker a round trip each.
    ingest = tracker.state.ingest
    assert ingest is not None
    linger = tracker.state.settings.ingest_linger_ms
    waits = {ingest.fetch_wait_ms}
    await _published_and_applied(tracker, _recent_scenario(tracker.new_tenant()))
    waits.add(ingest.fetch_wait_ms)

    assert linger > 1
    assert min(wait or 0 for wait in waits) >= linger


async def test_a_plans_tasks_carry_agents_durations_and_delegation(tracker: TrackerApp) -> None:
    scenario = _recent_scenario(tracker.new_tenant())
    await _published_and_applied(tracker, scenario)

    page = await tracker.json(f"/v1/tracker/plans/{scenario.plan_id}/tasks", scenario.tenant)

    tasks = page["items"]
    assert [t["task_id"] for t in tasks] == [scenario.action_task_id, *scenario.sub_task_ids]
    action, *subs = tasks
    assert action["agent_name"] == "shipping-broker"
    assert action["requested_by"] == "trip-planner"
    assert (action["status"], action["attempt"]) == ("completed", 1)
    assert action["duration_ms"] == pytest.approx(4.0)
    assert (action["event_type"], action["response_event"]) == (
        "shipping.quote.requested",
        "shipping.quoted",
    )
    for sub in subs:
        assert sub["agent_name"] == "carriers"
        assert sub["requested_by"] == "shipping-broker"
        assert sub["parent_task_id"] == scenario.action_task_id
        assert sub["parallel_group_id"] == scenario.group_id
        assert sub["status"] == "completed"
        assert sub["duration_ms"] > 0


async def test_a_fan_out_group_counts_its_answers(tracker: TrackerApp) -> None:
    scenario = _recent_scenario(tracker.new_tenant())
    # The last carrier's answer has not come yet.
    last_answer = scenario.by_type("carrier.quoted")[-1]
    partial = [(t, e) for t, e in scenario.envelopes if e.id != last_answer.id]
    before = _counters(tracker)
    await tracker.publish(partial)
    await _settled(tracker, before, len(partial))

    group = await tracker.json(f"/v1/tracker/delegations/{scenario.group_id}", scenario.tenant)

    assert (group["total"], group["completed"], group["failed"], group["pending"]) == (3, 2, 0, 1)
    assert group["task_id"] == scenario.action_task_id
    assert group["agent_name"] == "shipping-broker"
    assert group["completed_at"] is None
    assert [s["status"] for s in group["sub_tasks"]] == ["completed", "completed", "pending"]

    await tracker.publish([(Topic.ACTION_RESULTS, last_answer)])
    done = await eventually(
        lambda: tracker.json(f"/v1/tracker/delegations/{scenario.group_id}", scenario.tenant),
        lambda g: g["pending"] == 0,
    )
    assert (done["completed"], done["pending"]) == (3, 0)
    assert done["completed_at"] is not None


async def test_the_timeline_lists_every_envelope_of_the_plan_in_order(tracker: TrackerApp) -> None:
    scenario = _recent_scenario(tracker.new_tenant())
    await _published_and_applied(tracker, scenario)

    first = await tracker.json(
        f"/v1/tracker/plans/{scenario.plan_id}/timeline", scenario.tenant, limit=10
    )
    rest = await tracker.json(
        f"/v1/tracker/plans/{scenario.plan_id}/timeline",
        scenario.tenant,
        limit=200,
        cursor=first["next_cursor"],
    )

    entries = first["items"] + rest["items"]
    assert [e["event_id"] for e in entries] == [e.id for e in scenario.of_plan()]
    assert rest["next_cursor"] is None
    by_type = {e["event_type"]: e for e in entries}
    assert by_type["task.started"]["agent_name"] == "shipping-broker"
    assert by_type["task.started"]["task_id"] == scenario.action_task_id
    assert by_type["plan.state_changed"]["summary"] == "quoting -> done on shipping.quoted"
    assert by_type["carrier.quoted"]["topic"] == "action-results"


async def test_the_tree_holds_the_plan_and_its_sub_plans(tracker: TrackerApp) -> None:
    scenario = _recent_scenario(tracker.new_tenant())
    await _published_and_applied(tracker, scenario)

    tree = await tracker.json(f"/v1/tracker/plans/{scenario.plan_id}/tree", scenario.tenant)

    assert tree["plan_id"] == scenario.plan_id
    assert [(c["plan_id"], c["status"], c["current_state"]) for c in tree["children"]] == [
        (scenario.sub_plan_id, "completed", "packed")
    ]
    subs = await tracker.json("/v1/tracker/plans", scenario.tenant, parent_plan_id=scenario.plan_id)
    roots = await tracker.json("/v1/tracker/plans", scenario.tenant, root_only=True)
    assert [p["plan_id"] for p in subs["items"]] == [scenario.sub_plan_id]
    assert [p["plan_id"] for p in roots["items"]] == [scenario.plan_id]


async def test_duplicates_and_reordering_give_the_same_read_model(tracker: TrackerApp) -> None:
    in_order = _recent_scenario(tracker.new_tenant("ordered"))
    shuffled = in_order.for_tenant(tracker.new_tenant("shuffled"))
    # Every envelope twice: first backwards (every answer and task.completed before its
    # request and task.started, plan.completed before plan.started), then shuffled.
    again = list(shuffled.envelopes)
    random.Random(13).shuffle(again)
    envelopes = [*reversed(shuffled.envelopes), *again]
    await _published_and_applied(tracker, in_order)
    before = _counters(tracker)

    await tracker.publish(envelopes)
    await _settled(tracker, before, len(envelopes))

    applied = _counter(tracker, "disco_tracker_ingested_envelopes") - before[0]
    assert applied == len(shuffled.envelopes)  # each once, the copies skipped
    assert await _snapshot(tracker, shuffled) == await _snapshot(tracker, in_order)


async def test_an_answer_without_a_task_id_is_matched_to_its_request(tracker: TrackerApp) -> None:
    scenario = _recent_scenario(tracker.new_tenant())
    # A plain Kafka responder answers the first carrier request without naming its task,
    # and before the request itself arrives.
    answer = scenario.by_type("carrier.quoted")[0]
    anonymous = answer.with_changes(task_id=None)
    request = next(
        e for e in scenario.by_type("carrier.quote.requested") if e.task_id == answer.task_id
    )
    before = _counters(tracker)
    await tracker.publish([(Topic.ACTION_RESULTS, anonymous)])
    await _settled(tracker, before, 1)
    await tracker.publish([(Topic.ACTION_REQUESTS, request)])

    task = await eventually(
        lambda: tracker.found(f"/v1/tracker/tasks/{answer.task_id}", scenario.tenant),
        lambda view: view is not None and view["task"]["status"] == "completed",
    )
    assert task["task"]["agent_name"] == "carriers"
    assert task["task"]["event_type"] == "carrier.quote.requested"


async def test_malformed_and_unknown_payloads_are_counted_and_the_rest_applied(
    tracker: TrackerApp,
) -> None:
    tenant = tracker.new_tenant()
    bus = tracker.bus
    malformed_before = _counter(
        tracker, "disco_tracker_rejected_envelopes", topic="system-events", reason="malformed"
    )
    unknown_before = _counter(
        tracker, "disco_tracker_rejected_envelopes", topic="system-events", reason="unknown"
    )
    await bus.publish(Topic.SYSTEM_EVENTS, "task.started", {"no_task_id": True}, tenant_id=tenant)
    await bus.publish(Topic.SYSTEM_EVENTS, "task.teleported", {"task_id": "x"}, tenant_id=tenant)
    not_an_envelope = b'{"this": "is not an envelope"}'
    await bus.send_record(
        topic_name(Topic.SYSTEM_EVENTS, tracker.prefix), b"k", not_an_envelope, []
    )
    scenario = _recent_scenario(tenant)
    await tracker.publish(scenario.envelopes)

    view = await tracker.wait_for_plan(
        tenant, scenario.plan_id, lambda v: v["plan"]["status"] == "completed"
    )
    assert view["plan"]["task_counts"] == {"completed": 4}
    assert (
        _counter(
            tracker, "disco_tracker_rejected_envelopes", topic="system-events", reason="malformed"
        )
        == malformed_before + 1
    )
    assert (
        _counter(
            tracker, "disco_tracker_rejected_envelopes", topic="system-events", reason="unknown"
        )
        == unknown_before + 1
    )
    dead = await read_records(
        tracker.bootstrap,
        dlq_topic(topic_name(Topic.SYSTEM_EVENTS, tracker.prefix)),
        lambda seen: any(r.value == not_an_envelope for r in seen),
    )
    reasons = {
        dict(r.headers).get(DlqHeader.ERROR_TYPE.value) for r in dead if r.value == not_an_envelope
    }
    assert reasons == {b"EnvelopeError"}


async def test_a_question_that_times_out_fails_its_task_with_hitl_timeout(
    tracker: TrackerApp,
) -> None:
    tenant = tracker.new_tenant()
    bus = tracker.bus
    request = await bus.request(
        "document.review.requested",
        {"title": "Q3 report"},
        response_event="document.reviewed",
        tenant_id=tenant,
    )
    task_id = request.id
    await bus.publish(
        Topic.SYSTEM_EVENTS,
        "task.started",
        {"task_id": task_id, "agent_name": "reviewer", "event_type": request.type},
        task_id=task_id,
        tenant_id=tenant,
    )
    question = await bus.publish(
        Topic.NOTIFICATION_EVENTS,
        "notification.human_input",
        {
            "question": "Approve the Q3 report?",
            "response_event": "document.approval.received",
            "timeout_seconds": 2,
            "task_id": task_id,
        },
        correlation_id=f"ask-{task_id}",
        task_id=task_id,
        tenant_id=tenant,
    )

    waiting = await eventually(
        lambda: tracker.found(f"/v1/tracker/tasks/{task_id}", tenant),
        lambda view: view is not None and view["task"]["status"] == "awaiting_input",
    )
    assert waiting["task"]["hitl_deadline"] is not None
    assert [(w["correlation_id"], w["status"]) for w in waiting["waits"]] == [
        (question.correlation_id, "waiting")
    ]

    failed = await eventually(
        lambda: tracker.json(f"/v1/tracker/tasks/{task_id}", tenant),
        lambda view: view["task"]["status"] == "failed",
    )
    task = failed["task"]
    assert task["error"]["type"] == "hitl_timeout"
    assert task["completed_at"] == waiting["task"]["hitl_deadline"]
    assert task["hitl_deadline"] is None
    assert [w["status"] for w in failed["waits"]] == ["timed_out"]
    agents = await tracker.json("/v1/tracker/metrics/agents", tenant)
    assert [
        (a["agent_name"], a["count"], a["errors"], a["timed_out"]) for a in agents["items"]
    ] == [("reviewer", 1, 1, 1)]
