"""The tracker shows what real SDK agents ran: the demo's trip planner and fan-out worker,
nested in a plan, and a question to a human that times out (services and agents are
real processes, the broker and Postgres real)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.clients import StaticToken, TrackerClient
from disco_common.tracker import FeedEvent, PlanView
from tests.e2e.conftest import TENANT, AgentProcess, Stack, start_agents, stop_agents

pytestmark = pytest.mark.e2e

T = TypeVar("T")


@pytest.fixture(scope="module")
def demo_agents(e2e_stack: Stack) -> Iterator[AgentProcess]:
    """The demo's agents (examples/) and the plans built on them, in one process."""
    agents = start_agents(e2e_stack, "tracker-demo")
    try:
        yield agents
    finally:
        stop_agents(agents)


@contextlib.asynccontextmanager
async def _tracker(stack: Stack, tenant: str = TENANT) -> AsyncIterator[TrackerClient]:
    token = StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "operator"))
    async with TrackerClient(stack.urls["tracker"], token=token) as client:
        yield client


async def _eventually(read: Callable[[], Awaitable[T]], done: Callable[[T], bool]) -> T:
    seen: T | None = None
    try:
        async with asyncio.timeout(60):
            while True:
                seen = await read()
                if done(seen):
                    return seen
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"the tracker did not get there within 60 s: {seen!r}") from None


def _completed(view: PlanView | None) -> bool:
    return view is not None and view.plan.status == "completed"


async def _run_holiday(caller: BusClient) -> str:
    answer = await caller.request(
        "e2e.holiday.goal",
        {"city": "Lisbon"},
        response_event="e2e.holiday.done",
        tenant_id=TENANT,
        wait=120,
    )
    assert answer.data["success"] is True, answer.data  # type: ignore[index,call-overload]
    assert answer.plan_id is not None
    return answer.plan_id


async def test_the_demo_planner_and_fan_out_worker_show_as_they_ran(
    e2e_stack: Stack, demo_agents: AgentProcess, caller: BusClient
) -> None:
    plan_id = await _run_holiday(caller)

    async with _tracker(e2e_stack) as tracker:
        view = await _eventually(lambda: tracker.get_plan(plan_id), _completed)
        tasks = await _eventually(
            lambda: _all(tracker.iter_plan_tasks(plan_id)),
            lambda found: len(found) == 5 and all(t.status == "completed" for t in found),
        )
        tree = await tracker.plan_tree(plan_id)
        assert tree is not None
        trip_id = tree.children[0].plan_id
        trip = await _eventually(lambda: tracker.get_plan(trip_id), _completed)
        trip_tasks = [t async for t in tracker.iter_plan_tasks(trip_id)]
        shipping = next(t for t in tasks if t.event_type == "shipping.quote.requested")
        shipping_view = await tracker.get_task(shipping.task_id)
        assert shipping_view is not None
        group = await tracker.get_delegation(shipping_view.delegations[0])
        timeline = [entry async for entry in tracker.iter_timeline(plan_id)]
        agents = {a.agent_name: a for a in (await tracker.agent_metrics()).items}

    # The plan: its state machine as registered by its planner, and its path through it.
    assert view.plan.current_state == "done"
    assert view.plan.agent_name == "e2e-holiday-planner"
    assert view.definition is not None
    assert (view.definition.plan_type, view.definition.version) == ("e2e.holiday", "0.1.0")
    assert [move.to_state for move in view.transitions] == ["start", "trip", "shipping", "done"]
    # Its tasks: the trip goal (a sub-plan), the fan-out worker's task, the three carriers.
    assert [(t.event_type, t.agent_name) for t in tasks] == [
        ("trip.requested", "trip-planner"),
        ("shipping.quote.requested", "shipping-broker"),
        *[("carrier.quote.requested", "carriers")] * 3,
    ]
    assert shipping.attempt == 1
    assert shipping.requested_by == "e2e-holiday-planner"
    assert all(t.parent_task_id == shipping.task_id for t in tasks[2:])
    assert all(t.duration_ms is not None for t in tasks)
    # The worker's task took as long as its slowest carrier at least (it spans the fan-out).
    assert shipping.duration_ms is not None
    assert shipping.duration_ms >= max(t.duration_ms or 0 for t in tasks[2:])
    # The sub-plan: the demo's trip planner, found a flight and booked it.
    assert [(c.plan_type, c.status.value) for c in tree.children] == [("trip", "completed")]
    assert trip.plan.parent_plan_id == plan_id
    assert trip.plan.goal_task_id == tasks[0].task_id
    assert [move.to_state for move in trip.transitions] == ["start", "searching", "booking", "done"]
    assert [(t.event_type, t.agent_name) for t in trip_tasks] == [
        ("flights.search.requested", "travel-desk"),
        ("trip.book.requested", "travel-desk"),
    ]
    # The fan-out group: three of three came back.
    assert group is not None
    assert (group.total, group.completed, group.failed, group.pending) == (3, 3, 0, 0)
    assert {s.agent_name for s in group.sub_tasks} == {"carriers"}
    # The timeline, in the order things happened. (Agents announce on system-events right
    # after they published what they announce: a plan's first action, a task's answer.)
    kinds = [entry.event_type for entry in timeline]
    assert kinds.index("plan.started") < kinds.index("e2e.holiday.trip.planned")
    milestones = [
        "trip.requested",
        "e2e.holiday.trip.planned",
        "shipping.quote.requested",
        "task.started",
        "task.delegated",
        "carrier.quoted",
        "e2e.holiday.shipped",  # the worker answers, then announces task.completed
        "task.completed",
        "plan.completed",
    ]
    assert [kinds.index(kind) for kind in milestones] == sorted(
        kinds.index(kind) for kind in milestones
    )
    assert kinds.count("carrier.quoted") == 3
    assert agents["carriers"].count >= 3
    assert agents["shipping-broker"].p99_duration_ms is not None


async def test_a_question_that_times_out_fails_the_task_and_the_plan_takes_its_timeout_path(
    e2e_stack: Stack, demo_agents: AgentProcess, caller: BusClient
) -> None:
    answer = await caller.request(
        "e2e.timeout.goal",
        {"title": "Q3 report"},
        response_event="e2e.timeout.done",
        tenant_id=TENANT,
        wait=120,
    )
    plan_id = answer.plan_id
    assert plan_id is not None

    async with _tracker(e2e_stack) as tracker:
        view = await _eventually(lambda: tracker.get_plan(plan_id), _completed)
        tasks = [t async for t in tracker.iter_plan_tasks(plan_id)]
        review = next(t for t in tasks if t.event_type == "e2e.timeout.review.requested")
        review_view = await _eventually(
            lambda: tracker.get_task(review.task_id),
            lambda v: v is not None and v.task.status == "failed",
        )
        timeline = await _eventually(
            lambda: _all(tracker.iter_timeline(plan_id)),
            lambda entries: any(e.event_type == "e2e.timeout.review.answer" for e in entries),
        )

    assert review_view is not None
    task = review_view.task
    assert task.agent_name == "e2e-timeout-reviewer"
    assert task.error is not None
    assert task.error.type == "hitl_timeout"
    assert [w.status.value for w in review_view.waits] == ["timed_out"]
    assert review_view.waits[0].timeout_seconds == 1
    assert view.plan.current_state == "timed_out"
    # The question and its timeout are in the plan's history, in order.
    kinds = [e.event_type for e in timeline]
    asked = kinds.index("notification.human_input")
    assert asked < kinds.index("task.timeout") < kinds.index("e2e.timeout.review.judged")
    assert timeline[asked].summary == "question to a human: Approve 'Q3 report'?"
    last = view.transitions[-1]
    assert (last.from_state, last.to_state, last.trigger_event) == (
        "reviewing",
        "timed_out",
        "e2e.timeout.review.judged",
    )


async def test_another_tenant_sees_none_of_it_in_reads_metrics_or_the_feed(
    e2e_stack: Stack, demo_agents: AgentProcess, caller: BusClient
) -> None:
    plan_id = await _run_holiday(caller)
    async with _tracker(e2e_stack) as owner:
        view = await _eventually(lambda: owner.get_plan(plan_id), _completed)
        task_id = (await owner.list_plan_tasks(plan_id)).items[0].task_id
    other = "e2e-other"

    async with _tracker(e2e_stack, other) as tracker:
        feed = _Follower(tracker)
        async with feed:
            # Something of the other tenant's own, to know its feed is flowing.
            mine = await caller.request(
                "carrier.quote.requested",
                {"carrier": "swift", "kg": 1.0},
                response_event="e2e.other.quoted",
                tenant_id=other,
                wait=60,
            )
            seen = await feed.until(lambda events: any(e.status == "completed" for e in events))
        plans = await tracker.list_plans()
        missing = [
            await tracker.get_plan(plan_id),
            await tracker.plan_tree(plan_id),
            await tracker.get_task(task_id),
        ]
        timeline = await _refused(tracker.plan_timeline(plan_id))
        agents = await tracker.agent_metrics()

    assert view.plan.plan_id == plan_id
    assert plans.items == []
    assert missing == [None, None, None]
    assert timeline == "plan_not_found"
    assert {a.agent_name for a in agents.items} == {"carriers"}  # its own request only
    assert {e.task_id for e in seen} == {mine.task_id}
    assert all(e.plan_id is None for e in seen)


async def test_the_feed_shows_a_plan_move_live(
    e2e_stack: Stack, demo_agents: AgentProcess, caller: BusClient
) -> None:
    async with _tracker(e2e_stack) as tracker:
        feed = _Follower(tracker)
        async with feed:
            plan_id = await _run_holiday(caller)
            seen = await feed.until(
                lambda events: any(
                    e.kind == "plan" and e.plan_id == plan_id and e.status == "completed"
                    for e in events
                )
            )

    states = [e.current_state for e in seen if e.kind == "plan" and e.plan_id == plan_id]
    assert states[-1] == "done"
    assert [e.id for e in seen] == sorted({e.id for e in seen})


async def _all(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


async def _refused(call: Awaitable[Any]) -> str | None:
    from disco.clients import ServiceError

    try:
        await call
    except ServiceError as exc:
        return exc.code
    return None


class _Follower:
    """Follows a tenant's feed from its start in the background."""

    def __init__(self, tracker: TrackerClient) -> None:
        self._tracker = tracker
        self.seen: list[FeedEvent] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Follower:
        self._task = asyncio.create_task(self._follow())
        return self

    async def _follow(self) -> None:
        async for change in self._tracker.feed(after=0):
            self.seen.append(change)

    async def until(self, done: Callable[[list[FeedEvent]], bool]) -> list[FeedEvent]:
        async def read() -> list[FeedEvent]:
            return list(self.seen)

        return await _eventually(read, done)

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
