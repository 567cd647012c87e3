"""The agents the end-to-end tests run, grouped by the process ("role") that hosts them.

Every event type starts with ``e2e.`` so the tests' own traffic is easy to tell.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from disco import (
    Agent,
    DelegationSpec,
    GoalContext,
    PlanDefinition,
    Planner,
    PlatformContext,
    ResultContext,
    StateAction,
    StateConfig,
    StateTransition,
    TaskContext,
    Tool,
    Worker,
)
from disco_common.envelope import Envelope
from tests.e2e.kill_agents import KILL_ROLES
from tests.e2e.runtime_agents import RUNTIME_ROLES


class Addition(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    total: int


class Delayed(BaseModel):
    value: int
    delay_ms: int = 0


# -- tools ---------------------------------------------------------------------------


def tools() -> list[Agent]:
    tool = Tool("e2e-tools", description="Arithmetic and test helpers for the e2e suite.")

    @tool.on_invoke("e2e.add.requested")
    async def add(request: Addition) -> Total:
        """Adds two integers."""
        return Total(total=request.a + request.b)

    @tool.on_invoke("e2e.fail.requested")
    async def fail(request: Any) -> None:
        """Always fails."""
        raise RuntimeError(f"the tool refuses: {request.data.get('why', 'no reason')}")

    @tool.on_invoke("e2e.delayed.requested")
    async def delayed(request: Delayed) -> dict[str, int]:
        """Answers with ``value`` after ``delay_ms`` (to shuffle answer order)."""
        await asyncio.sleep(request.delay_ms / 1000)
        return {"value": request.value}

    @tool.on_invoke("e2e.search.requested")
    async def search(request: Any) -> dict[str, Any]:
        """Finds ``hits`` results; fails for the query "boom"."""
        query = request.data["query"]
        if query == "boom":
            raise RuntimeError("search backend down")
        return {"query": query, "count": int(request.data.get("hits", 0))}

    @tool.on_invoke("e2e.inbox.requested")
    async def inbox(request: Any, context: PlatformContext) -> dict[str, Any]:
        """The questions of a task still waiting for a human, read from the tracker."""
        assert context.tracker is not None
        page = await context.tracker.list_questions(
            status="waiting", task_id=request.data["task_id"]
        )
        return {"questions": [question.question for question in page.items]}

    return [tool]


# -- workers --------------------------------------------------------------------------


def workers() -> list[Agent]:
    outer = Worker("e2e-outer")

    @outer.on_task("e2e.outer.requested")
    async def outer_start(task: TaskContext[Any]) -> None:
        await task.delegate(
            "e2e.inner.requested", {"n": task.data["n"]}, response_event="e2e.outer.step"
        )

    @outer.on_result("e2e.outer.step")
    async def outer_finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"outer": result.result})

    inner = Worker("e2e-inner")

    @inner.on_task("e2e.inner.requested")
    async def inner_start(task: TaskContext[Any]) -> None:
        n = task.data["n"]
        await task.delegate("e2e.add.requested", {"a": n, "b": n}, response_event="e2e.inner.step")

    @inner.on_result("e2e.inner.step")
    async def inner_finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"inner": result.result})

    fanout = Worker("e2e-fanout")

    @fanout.on_task("e2e.fanout.requested")
    async def fan_out(task: TaskContext[Any]) -> None:
        # "e2e.manual.requested" has no agent: the test answers in the order it wants.
        target = task.data.get("target", "e2e.delayed.requested")
        await task.delegate_parallel(
            [
                DelegationSpec(
                    event_type=target,
                    data={"value": value, "delay_ms": delay},
                    response_event="e2e.fanout.part",
                )
                for value, delay in zip(task.data["values"], task.data["delays_ms"], strict=True)
            ]
        )

    @fanout.on_result("e2e.fanout.part")
    async def fan_in(result: ResultContext) -> None:
        task = await result.restore_task()
        parts = task.aggregate_parallel_results(task.parallel_groups[0])
        if parts is not None:
            order = [info.sub_task_id for info in task.sub_tasks.values()]
            arrival = sorted(
                task.sub_tasks.values(), key=lambda info: info.finished_at or info.delegated_at
            )
            await task.complete(
                {
                    "values": [parts[sid]["value"] for sid in order],  # type: ignore[index,call-overload]
                    "arrival": [order.index(info.sub_task_id) for info in arrival],
                }
            )

    reviewer = Worker("e2e-reviewer")

    @reviewer.on_task("e2e.review.requested")
    async def ask(task: TaskContext[Any]) -> None:
        await task.request_human_input(
            f"Approve {task.data['title']!r}?",
            response_event="e2e.review.answer",
            timeout_seconds=int(task.data["timeout_seconds"]),
            options=["yes", "no"],
        )

    @reviewer.on_human_input("e2e.review.answer")
    async def decide(result: ResultContext) -> None:
        task = await result.restore_task()
        if result.timed_out:
            await task.fail("nobody answered in time")
        else:
            await task.complete({"approved": result.answer == "yes"})

    return [outer, inner, fanout, reviewer]


def survivor() -> list[Agent]:
    """One instance of a worker that waits for an external answer (killed in a test)."""
    worker = Worker("e2e-survivor")

    @worker.on_task("e2e.survive.requested")
    async def start(task: TaskContext[Any]) -> None:
        await task.delegate(
            "e2e.external.requested", {"job": task.data["job"]}, response_event="e2e.survive.step"
        )

    @worker.on_result("e2e.survive.step")
    async def finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"answer": result.result, "completed_by": os.getpid()})

    return [worker]


# -- planners --------------------------------------------------------------------------

TRIP = PlanDefinition(
    plan_type="e2e.trip",
    description="Search; book through a sub-plan when found, else ask a human.",
    states=[
        StateConfig(state_name="start", default_next="searching"),
        StateConfig(
            state_name="searching",
            action=StateAction(
                event_type="e2e.search.requested",
                response_event="e2e.trip.searched",
                data={"query": "{goal_data.city}", "hits": "{goal_data.hits}"},
            ),
            transitions=[
                StateTransition(
                    on_event="e2e.trip.searched", to_state="failed", condition="!success"
                ),
                StateTransition(
                    on_event="e2e.trip.searched", to_state="booking", condition="result.count > 0"
                ),
                StateTransition(on_event="e2e.trip.searched", to_state="asking"),
            ],
        ),
        StateConfig(
            state_name="booking",
            action=StateAction(
                event_type="e2e.booking.goal",
                response_event="e2e.trip.booked",
                data={"city": "{goal_data.city}"},
            ),
            transitions=[
                StateTransition(on_event="e2e.trip.booked", to_state="done", condition="success"),
                StateTransition(on_event="e2e.trip.booked", to_state="failed"),
            ],
        ),
        StateConfig(
            state_name="asking",
            action=StateAction(
                event_type="notification.human_input",
                topic="notification-events",
                response_event="e2e.trip.clarified",
                data={"question": "Nothing found in {goal_data.city}. Go anyway?"},
            ),
            transitions=[
                StateTransition(
                    on_event="e2e.trip.clarified", to_state="done", condition="result == 'yes'"
                ),
                StateTransition(on_event="e2e.trip.clarified", to_state="failed"),
            ],
        ),
        StateConfig(state_name="done", is_terminal=True),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)

BOOKING = PlanDefinition(
    plan_type="e2e.booking",
    states=[
        StateConfig(state_name="start", default_next="adding"),
        StateConfig(
            state_name="adding",
            action=StateAction(
                event_type="e2e.add.requested",
                response_event="e2e.booking.priced",
                data={"a": 100, "b": 20},
            ),
            transitions=[StateTransition(on_event="e2e.booking.priced", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ],
)

GATED = [
    StateConfig(state_name="start", default_next="pricing"),
    StateConfig(
        state_name="pricing",
        action=StateAction(
            event_type="e2e.add.requested", response_event="e2e.gated.priced", data={"a": 1, "b": 2}
        ),
        transitions=[StateTransition(on_event="e2e.gated.priced", to_state="done")],
    ),
    StateConfig(state_name="done", is_terminal=True),
]


def planners() -> list[Agent]:
    trip = Planner("e2e-trip-planner")
    trip.add_plan("e2e.trip.goal", TRIP)

    @trip.on_goal("e2e.gated.goal")
    async def gated(goal: GoalContext[Any]) -> None:
        plan = goal.new_plan(GATED)
        await plan.pause("waiting for the gate")

    @trip.on_event(topic="business-facts", event_type="e2e.gate.opened")
    async def open_gate(event: Envelope) -> None:
        plan = await trip.restore_plan(event.data["plan_id"])  # type: ignore[index,call-overload]
        if plan is not None and plan.status == "paused":
            await plan.resume({"opened_by": event.data["by"]})  # type: ignore[index,call-overload]

    booking = Planner("e2e-booking-planner")
    booking.add_plan("e2e.booking.goal", BOOKING)
    return [trip, booking]


def gatherer() -> list[Agent]:
    """One instance of a fan-in worker; the tests run two of them side by side."""
    worker = Worker("e2e-gatherer")

    @worker.on_task("e2e.gather.requested")
    async def fan_out(task: TaskContext[Any]) -> None:
        await task.delegate_parallel(
            [
                DelegationSpec(
                    event_type="e2e.manual.requested",
                    data={"value": value},
                    response_event="e2e.gather.part",
                )
                for value in task.data["values"]
            ]
        )

    @worker.on_result("e2e.gather.part")
    async def fan_in(result: ResultContext) -> None:
        task = await result.restore_task()
        parts = task.aggregate_parallel_results(task.parallel_groups[0])
        if parts is not None:
            await task.complete(
                {"sum": sum(part["value"] for part in parts.values()), "pid": os.getpid()}  # type: ignore[index,call-overload,misc]
            )

    return [worker]


def relay() -> list[Agent]:
    """A two-step worker; the crash tests kill one instance between a save and its publish.

    Its second delegation is made by a result handler, the window that only a
    redelivered answer can close.
    """
    worker = Worker("e2e-relay")

    @worker.on_task("e2e.relay.requested")
    async def first(task: TaskContext[Any]) -> None:
        n = task.data["n"]
        await task.delegate("e2e.add.requested", {"a": n, "b": n}, response_event="e2e.relay.one")

    @worker.on_result("e2e.relay.one")
    async def second(result: ResultContext) -> None:
        task = await result.restore_task()
        total = result.result["total"]  # type: ignore[index,call-overload]
        await task.delegate(
            "e2e.add.requested", {"a": total, "b": 1}, response_event="e2e.relay.two"
        )

    @worker.on_result("e2e.relay.two")
    async def finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"total": result.result["total"], "completed_by": os.getpid()})  # type: ignore[index,call-overload]

    return [worker]


RELAY_PLAN = PlanDefinition(
    plan_type="e2e.relay",
    states=[
        StateConfig(state_name="start", default_next="pricing"),
        StateConfig(
            state_name="pricing",
            action=StateAction(
                event_type="e2e.add.requested",
                response_event="e2e.relay.priced",
                data={"a": "{goal_data.n}", "b": "{goal_data.n}"},
            ),
            transitions=[StateTransition(on_event="e2e.relay.priced", to_state="taxing")],
        ),
        StateConfig(
            state_name="taxing",
            action=StateAction(
                event_type="e2e.add.requested",
                response_event="e2e.relay.taxed",
                data={"a": "{results.pricing.total}", "b": 1},
            ),
            transitions=[StateTransition(on_event="e2e.relay.taxed", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ],
)


def relay_planner() -> list[Agent]:
    """A two-action planner; the crash tests kill one instance after it saved its second state."""
    planner = Planner("e2e-relay-planner")
    planner.add_plan("e2e.relay.goal", RELAY_PLAN)
    return [planner]


HOLIDAY = PlanDefinition(
    plan_type="e2e.holiday",
    description="Plan a trip (a sub-plan of the demo's trip planner), then ship the luggage.",
    states=[
        StateConfig(state_name="start", default_next="trip"),
        StateConfig(
            state_name="trip",
            action=StateAction(
                event_type="trip.requested",
                response_event="e2e.holiday.trip.planned",
                data={"city": "{goal_data.city}"},
            ),
            transitions=[StateTransition(on_event="e2e.holiday.trip.planned", to_state="shipping")],
        ),
        StateConfig(
            state_name="shipping",
            action=StateAction(
                event_type="shipping.quote.requested",
                response_event="e2e.holiday.shipped",
                data={"kg": 2.0},
            ),
            transitions=[StateTransition(on_event="e2e.holiday.shipped", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ],
)

TIMEOUT_REVIEW = PlanDefinition(
    plan_type="e2e.timeout.review",
    description="Ask a reviewer, who asks a human with a timeout; nobody answers.",
    states=[
        StateConfig(state_name="start", default_next="reviewing"),
        StateConfig(
            state_name="reviewing",
            action=StateAction(
                event_type="e2e.timeout.review.requested",
                response_event="e2e.timeout.review.judged",
                data={"title": "{goal_data.title}"},
            ),
            transitions=[
                StateTransition(
                    on_event="e2e.timeout.review.judged", to_state="approved", condition="success"
                ),
                StateTransition(on_event="e2e.timeout.review.judged", to_state="timed_out"),
            ],
        ),
        StateConfig(state_name="approved", is_terminal=True),
        StateConfig(state_name="timed_out", is_terminal=True, description="Nobody answered."),
    ],
)


def tracker_demo() -> list[Agent]:
    """The demo's fan-out worker and trip planner (examples/), a planner that nests them,
    and a plan whose reviewer's question to a human times out."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import parallel_worker
    import travel_planner

    from disco_common.tasks import ErrorInfo

    holiday = Planner("e2e-holiday-planner")
    holiday.add_plan("e2e.holiday.goal", HOLIDAY)
    review = Planner("e2e-timeout-planner")
    review.add_plan("e2e.timeout.goal", TIMEOUT_REVIEW)
    reviewer = Worker("e2e-timeout-reviewer")

    @reviewer.on_task("e2e.timeout.review.requested")
    async def ask(task: TaskContext[Any]) -> None:
        await task.request_human_input(
            f"Approve {task.data['title']!r}?",  # type: ignore[index,call-overload]
            response_event="e2e.timeout.review.answer",
            timeout_seconds=1,
        )

    @reviewer.on_human_input("e2e.timeout.review.answer")
    async def decide(result: ResultContext) -> None:
        task = await result.restore_task()
        if result.timed_out:
            await task.fail(ErrorInfo(type="hitl_timeout", message="nobody answered in time"))
        else:
            await task.complete({"approved": result.answer == "yes"})

    return [*parallel_worker.AGENTS, *travel_planner.AGENTS, holiday, review, reviewer]


CAMPAIGN_LEDGER_ENV = "CAMPAIGN_LEDGER"
"""Where the campaign worker applies its effect: a ledger file, one line per effect."""


class Ledger:
    """An external system honouring idempotency keys: an append-only file of
    ``key task`` lines, plus ``<ledger>.runs`` with one line per handler run.

    One worker process writes at a time (the test kills and restarts it), and a
    SIGKILL loses nothing already written (the page cache outlives the process).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._runs = f"{path}.runs"
        self._applied: set[str] = set()
        if os.path.exists(path):
            with open(path, encoding="utf-8") as existing:
                self._applied = {line.split(" ", 1)[0] for line in existing if line.strip()}

    def apply(self, key: str, task: str) -> None:
        with open(self._runs, "a", encoding="utf-8") as runs:
            runs.write(f"{task}\n")
        if key in self._applied:
            return  # applied before a crash: the key says so
        with open(self._path, "a", encoding="utf-8") as ledger:
            ledger.write(f"{key} {task}\n")
        self._applied.add(key)


def campaign() -> list[Agent]:
    """A Worker whose effect is outside disco (a ledger), applied with its idempotency key;
    its dedup store is the memory service's (the Workers' default)."""
    from disco import current_context

    ledger = Ledger(os.environ[CAMPAIGN_LEDGER_ENV])
    worker = Worker("e2e-campaign", register=False, validate_requests=False)

    @worker.on_task("e2e.campaign.requested")
    async def apply(task: TaskContext[Any]) -> None:
        ledger.apply(current_context().idempotency_key, str(task.data["n"]))  # type: ignore[index,call-overload]
        await task.complete({"n": task.data["n"]})  # type: ignore[index,call-overload]

    return [worker]


def gateway() -> list[Agent]:
    from tests.e2e.gateway.agents import build

    return build()


ROLES = {
    "tools": tools,
    "workers": workers,
    "planners": planners,
    "survivor": survivor,
    "gatherer": gatherer,
    "relay": relay,
    "relay-planner": relay_planner,
    "tracker-demo": tracker_demo,
    "campaign": campaign,
    **RUNTIME_ROLES,
    **KILL_ROLES,
    "gateway": gateway,
}
