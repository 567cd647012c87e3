"""The ingest's merge rules: any order and any cut into batches folds to the same patches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from disco_tracker.ingest.facts import Problem, read_envelope
from disco_tracker.ingest.patches import Fold, PlanPatch, TaskPatch, earlier_final, later_live
from tests.fixtures.properties import examples
from tests.integration.tracker.scenario import plan_scenario

SCENARIO = plan_scenario("acme", start=datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
ENVELOPES = SCENARIO.envelopes
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fold(order: list[int], cuts: list[int]) -> Fold:
    """Fold the envelopes in ``order``, batch by batch (cut after the indexes in ``cuts``),
    merging each batch's patches into the total as the database does."""
    total = Fold()
    batch = Fold()
    for position, index in enumerate(order):
        topic, envelope = ENVELOPES[index]
        read_envelope(topic.value, envelope, keep_data=True).fold_into(batch)
        if position in cuts or position == len(order) - 1:
            for patch in batch.plans.values():
                total.plan(patch)
            for task in batch.tasks.values():
                total.task(task)
            for group in batch.groups.values():
                total.group(group)
            batch = Fold()
    return total


def _state(fold: Fold) -> tuple[object, ...]:
    def plan(p: PlanPatch) -> tuple[object, ...]:
        return (
            p.plan_type, p.goal_task_id, p.parent_plan_id, p.agent_name, p.live_status,
            p.final_status, p.final_at, p.final_state, p.state, p.state_step, p.started_at, p.at,
        )  # fmt: skip

    def task(t: TaskPatch) -> tuple[object, ...]:
        return (
            t.plan_id, t.parent_task_id, t.parallel_group_id, t.event_type, t.agent_name,
            t.requested_by, t.live_status, t.final_status, t.final_at, t.error, t.starts,
            t.requested_at, t.started_at, t.first_seen_at, t.at,
        )  # fmt: skip

    return (
        {k: plan(v) for k, v in fold.plans.items()},
        {k: task(v) for k, v in fold.tasks.items()},
        {k: (g.task_id, g.expected, g.created_at) for k, g in fold.groups.items()},
    )


IN_ORDER = _state(_fold(list(range(len(ENVELOPES))), []))


@settings(max_examples=examples(200), deadline=None)
@given(
    order=st.permutations(range(len(ENVELOPES))),
    cuts=st.lists(st.integers(0, len(ENVELOPES) - 1), max_size=6),
)
def test_any_order_and_any_batches_fold_to_the_same_plans_tasks_and_groups(
    order: list[int], cuts: list[int]
) -> None:
    assert _state(_fold(order, cuts)) == IN_ORDER


def test_the_folded_plan_and_tasks_say_what_ran() -> None:
    plans, tasks, groups = IN_ORDER
    plan = plans[SCENARIO.plan_id]
    assert plan[5:9] == ("completed", plan[6], "done", "done")
    action = tasks[SCENARIO.action_task_id]
    assert (action[4], action[7], action[10]) == ("shipping-broker", "completed", 1)
    assert groups[SCENARIO.group_id][:2] == (SCENARIO.action_task_id, 3)


def test_the_latest_live_status_and_the_earliest_final_one_win() -> None:
    later = T0 + timedelta(seconds=1)
    assert later_live(T0, "waiting", later, "running")
    assert not later_live(later, "running", T0, "waiting")
    assert earlier_final(later, "completed", T0, "failed")  # a timeout at its deadline wins
    assert not earlier_final(T0, "failed", later, "completed")
    assert earlier_final(T0, "completed", T0, "failed")  # a tie goes to failed


def test_an_unknown_system_event_or_bad_data_is_a_problem_not_an_error() -> None:
    _, started = next((t, e) for t, e in ENVELOPES if e.type == "task.started")
    unknown = started.with_changes(type="task.teleported")
    broken = started.with_changes(data={"no": "task id"})

    unknown_reading = read_envelope("system-events", unknown, keep_data=True)
    broken_reading = read_envelope("system-events", broken, keep_data=True)

    assert unknown_reading.problem is Problem.UNKNOWN
    assert broken_reading.problem is Problem.MALFORMED
    assert broken_reading.patches == []
    assert broken_reading.row.summary == "malformed data"
