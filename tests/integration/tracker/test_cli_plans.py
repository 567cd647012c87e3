"""``disco plans list|show|watch`` against a running tracker."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from disco_common.ids import utcnow
from tests.integration.tracker.read_model_support import TrackerApp, tracker_fixture
from tests.integration.tracker.scenario import Scenario, plan_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

tracker = tracker_fixture()

REPO = Path(__file__).resolve().parents[3]


async def _disco(
    tracker: TrackerApp, tenant: str, *args: str, columns: int = 250
) -> tuple[int, str, str]:
    # Async: the tracker serves from this test's event loop.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "disco._cli.main",
        *args,
        env={
            **os.environ,
            "DISCO_TRACKER_URL": tracker.url,
            "DISCO_TENANT_ID": tenant,
            "COLUMNS": str(columns),
            "NO_COLOR": "1",
        },
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def _scenario(tracker: TrackerApp) -> Scenario:
    scenario = plan_scenario(tracker.new_tenant(), start=utcnow() - timedelta(minutes=1))
    await tracker.publish(scenario.envelopes)
    await tracker.wait_for_plan(
        scenario.tenant, scenario.plan_id, lambda v: v["plan"]["task_counts"].get("completed") == 4
    )
    return scenario


async def test_plans_list_shows_each_plan_with_its_state_and_tasks(tracker: TrackerApp) -> None:
    scenario = await _scenario(tracker)

    code, out, err = await _disco(tracker, scenario.tenant, "plans", "list", "--root")

    assert code == 0, err
    row = next(line for line in out.splitlines() if scenario.plan_id in line)
    for expected in ("trip", "completed", "done", "trip-planner", "4/4"):
        assert expected in row


async def test_plans_list_in_a_narrow_terminal_keeps_every_field_and_the_whole_id(
    tracker: TrackerApp,
) -> None:
    scenario = await _scenario(tracker)

    code, out, err = await _disco(tracker, scenario.tenant, "plans", "list", "--root", columns=80)

    assert code == 0, err
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    at = next(i for i, line in enumerate(lines) if scenario.plan_id in line)
    block = " ".join(lines[at : at + 2])
    for expected in ("trip", "completed", "done", "trip-planner", "4/4"):
        assert expected in block


async def test_plans_show_draws_tasks_groups_sub_plans_and_the_timeline(
    tracker: TrackerApp,
) -> None:
    scenario = await _scenario(tracker)

    code, out, err = await _disco(tracker, scenario.tenant, "plans", "show", scenario.plan_id)

    assert code == 0, err
    assert "shipping-broker" in out
    assert out.count("carriers") >= 3
    assert f"{scenario.group_id}" in out
    assert "3 of 3" in out
    assert scenario.sub_plan_id in out  # the sub-plan tree
    assert "quoting -> done on shipping.quoted" in out  # a timeline summary


async def test_plans_show_of_an_unknown_plan_says_so(tracker: TrackerApp) -> None:
    code, _, err = await _disco(tracker, tracker.new_tenant(), "plans", "show", "nope")

    assert code == 1
    assert "no plan 'nope'" in err


async def test_plans_watch_prints_the_changes(tracker: TrackerApp) -> None:
    scenario = await _scenario(tracker)

    code, out, err = await _disco(
        tracker, scenario.tenant, "plans", "watch", scenario.plan_id, "--from-start", "-n", "2"
    )

    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 2
    assert all(scenario.plan_id in line or "task" in line for line in lines)
