"""Retention: finished plans older than the retention go, with their tasks and timelines."""

from __future__ import annotations

from datetime import timedelta

import pytest

from disco_common.ids import utcnow
from disco_tracker.retention.service import sweep_expired
from tests.integration.tracker.read_model_support import TrackerApp, tracker_fixture
from tests.integration.tracker.scenario import plan_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

tracker = tracker_fixture()


async def test_plans_that_ended_before_the_retention_are_removed_in_batches(
    tracker: TrackerApp,
) -> None:
    tenant = tracker.new_tenant()
    old = [plan_scenario(tenant, start=utcnow() - timedelta(days=40, minutes=i)) for i in range(3)]
    recent = plan_scenario(tenant, start=utcnow() - timedelta(minutes=5))
    for scenario in [*old, recent]:
        await tracker.publish(scenario.envelopes)
        await tracker.wait_for_plan(
            tenant, scenario.plan_id, lambda v: v["plan"]["task_counts"].get("completed") == 4
        )

    removed = await sweep_expired(
        tracker.state.require_database(),
        retention=timedelta(days=30),
        feed_retention=timedelta(days=1),
        batch_size=2,  # several rounds, two plans each
    )

    assert removed > 0
    for scenario in old:
        for path in (
            f"/v1/tracker/plans/{scenario.plan_id}",
            f"/v1/tracker/plans/{scenario.plan_id}/timeline",
            f"/v1/tracker/tasks/{scenario.action_task_id}",
            f"/v1/tracker/delegations/{scenario.group_id}",
        ):
            assert (await tracker.get(path, tenant)).status_code == 404, path
    view = await tracker.json(f"/v1/tracker/plans/{recent.plan_id}", tenant)
    timeline = await tracker.json(f"/v1/tracker/plans/{recent.plan_id}/timeline", tenant)
    assert view["plan"]["task_counts"] == {"completed": 4}
    assert len(timeline["items"]) == len(recent.of_plan())
    # The old goals' tasks ran outside any plan: they went too; the recent one stays.
    assert (
        await tracker.get(f"/v1/tracker/tasks/{old[0].goal_task_id}", tenant)
    ).status_code == 404
    assert (
        await tracker.get(f"/v1/tracker/tasks/{recent.goal_task_id}", tenant)
    ).status_code == 200
