"""Planner: goals as state machines — success, failure, conditions, pauses, sub-plans."""

from __future__ import annotations

from typing import Any

import pytest

from disco.agents import (
    GoalContext,
    InvocationContext,
    PlanConflictError,
    PlanError,
    Planner,
    StateConflictError,
    TaskConflictError,
    Tool,
    TransitionContext,
)
from disco.llm import ScriptedDriver
from disco.testing import AgentTestKit, InMemoryMemory
from disco_common.plans import (
    PlanDefinition,
    PlanStatus,
    StateAction,
    StateConfig,
    StateTransition,
)
from libs.sdk.tests.agents._agents import ids_asked


def search_tool() -> Tool:
    """Finds ``hits`` results for a query; fails for the query "boom"."""
    tool = Tool("search", register=False)

    @tool.on_invoke("search.requested")
    async def search(request: InvocationContext[Any]) -> dict[str, Any]:
        query = request.data["query"]
        if query == "boom":
            raise RuntimeError("search backend down")
        return {"query": query, "count": int(request.data.get("hits", 0))}

    @tool.on_invoke("summarize.requested")
    async def summarize(request: InvocationContext[Any]) -> dict[str, Any]:
        return {"summary": f"{request.data['count']} results for {request.data['query']}"}

    return tool


RESEARCH = PlanDefinition(
    plan_type="research",
    description="Search, then summarize; ask a human when nothing is found.",
    states=[
        StateConfig(state_name="start", default_next="searching"),
        StateConfig(
            state_name="searching",
            action=StateAction(
                event_type="search.requested",
                response_event="search.done",
                data={"query": "{goal_data.topic}", "hits": "{goal_data.hits}"},
            ),
            transitions=[
                StateTransition(on_event="search.done", to_state="failed", condition="!success"),
                StateTransition(
                    on_event="search.done", to_state="summarizing", condition="result.count > 0"
                ),
                StateTransition(on_event="search.done", to_state="asking"),
            ],
        ),
        StateConfig(
            state_name="summarizing",
            action=StateAction(
                event_type="summarize.requested",
                response_event="summary.done",
                data={"query": "{results.searching.query}", "count": "{results.searching.count}"},
            ),
            transitions=[StateTransition(on_event="summary.done", to_state="done")],
        ),
        StateConfig(
            state_name="asking",
            action=StateAction(
                event_type="notification.human_input",
                topic="notification-events",
                response_event="research.clarified",
                data={"question": "Nothing found for {goal_data.topic}. Give up?"},
            ),
            transitions=[
                StateTransition(
                    on_event="research.clarified", to_state="done", condition="result == 'yes'"
                ),
                StateTransition(on_event="research.clarified", to_state="failed"),
            ],
        ),
        StateConfig(state_name="done", is_terminal=True),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)


def research_planner() -> Planner:
    planner = Planner("researcher", register=False)
    planner.add_plan("research.goal", RESEARCH)
    return planner


async def test_a_plan_runs_through_its_states_to_success_and_answers_the_goal() -> None:
    async with AgentTestKit(research_planner(), search_tool()) as kit:
        goal = await kit.request(
            "research.goal", {"topic": "tansu", "hits": 3}, response_event="research.done"
        )

    result = kit.result_of(goal)
    assert result.success is True
    assert result.result["summarizing"] == {"summary": "3 results for tansu"}  # type: ignore[index,call-overload]
    (search,) = kit.requests("search.requested")
    assert search.data == {"query": "tansu", "hits": 3}  # templates keep types
    states = [e.data["to_state"] for e in kit.system_events("plan.state_changed")]  # type: ignore[index,call-overload]
    assert states == ["start", "searching", "summarizing", "done"]
    types = [e.type for e in kit.system_events()]
    assert types[0] == "plan.started"
    assert types[-1] == "plan.completed"


async def test_a_plans_moves_are_dated_when_they_happened_before_their_requests() -> None:
    # A plan announces its moves once the state's action is out; a timeline
    # ordered by time (the tracker's) must still show it entering a state first.
    async with AgentTestKit(research_planner(), search_tool()) as kit:
        await kit.request("research.goal", {"topic": "tansu", "hits": 3}, response_event="r")

    (started,) = kit.system_events("plan.started")
    moves = {e.data["to_state"]: e.time for e in kit.system_events("plan.state_changed")}  # type: ignore[index,call-overload]
    (search,) = kit.requests("search.requested")
    (summarize,) = kit.requests("summarize.requested")
    assert started.time <= moves["start"] <= moves["searching"] < search.time
    assert search.time < moves["summarizing"] < summarize.time
    assert summarize.time < moves["done"]
    (completed,) = kit.system_events("plan.completed")
    assert moves["done"] <= completed.time


async def test_an_answer_moves_the_copy_this_process_saved_without_reading_it_back() -> None:
    memory = InMemoryMemory()
    reads = ids_asked(memory, "get_plan_context")
    async with AgentTestKit(research_planner(), search_tool(), memory=memory) as kit:
        goal = await kit.request("research.goal", {"topic": "tansu", "hits": 3}, response_event="r")

    assert kit.result_of(goal).success is True
    assert reads == []  # two answers, each moved the copy the step before saved
    (record,) = memory.plans.values()
    assert record.context.status is PlanStatus.COMPLETED


async def test_a_copy_another_instance_moved_past_is_read_afresh_and_the_plan_goes_on() -> None:
    memory = InMemoryMemory()
    tool = Tool("search", register=False)
    touched: list[int] = []

    @tool.on_invoke("search.requested")
    async def search(request: InvocationContext[Any]) -> dict[str, Any]:
        # Another instance of the planner saves the plan meanwhile (a recovery, say).
        plan_id = request.envelope.plan_id
        assert plan_id is not None
        stored = await memory.get_plan_context(plan_id)
        assert stored is not None
        again = await memory.store_plan_context(
            plan_id, stored.context, expected_version=stored.version
        )
        touched.append(again.version)
        return {"query": request.data["query"], "count": 2}

    @tool.on_invoke("summarize.requested")
    async def summarize(request: InvocationContext[Any]) -> dict[str, Any]:
        return {"summary": f"{request.data['count']} results"}

    reads = ids_asked(memory, "get_plan_context")
    async with AgentTestKit(research_planner(), tool, memory=memory) as kit:
        goal = await kit.request("research.goal", {"topic": "tansu", "hits": 2}, response_event="r")

    result = kit.result_of(goal)
    assert result.success is True
    assert result.result["summarizing"] == {"summary": "2 results"}  # type: ignore[index,call-overload]
    # The tool's own read, then the planner's after its save lost to the newer version.
    assert len(reads) == 2
    states = [e.data["to_state"] for e in kit.system_events("plan.state_changed")]  # type: ignore[index,call-overload]
    assert states == ["start", "searching", "summarizing", "done"]  # each once
    (record,) = memory.plans.values()
    assert record.version > touched[0]


async def test_the_plans_listing_follows_a_plan_to_its_end() -> None:
    async with AgentTestKit(research_planner(), search_tool()) as kit:
        await kit.request("research.goal", {"topic": "tansu", "hits": 3}, response_event="r")

    ((plan_id, record),) = kit.memory.plan_records.items()
    assert record.plan_id == plan_id
    assert record.goal_event == "research.goal"
    assert record.status is PlanStatus.COMPLETED
    assert record.completed_at is not None


async def test_a_plan_saved_over_a_newer_version_raises_a_plan_conflict() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, search_tool()) as kit:
        await kit.request("research.goal", {"topic": "nothing", "hits": 0}, response_event="r")
        ((plan_id, _),) = kit.memory.plans.items()
        first = await planner.restore_plan(plan_id)
        second = await planner.restore_plan(plan_id)
        assert first is not None
        assert second is not None
        first.state["note"] = "first"
        await first.save()
        second.state["note"] = "second"
        with pytest.raises(PlanConflictError) as raised:
            await second.save()

    assert raised.value.plan_id == plan_id
    assert isinstance(raised.value, StateConflictError)
    assert not isinstance(raised.value, TaskConflictError)
    assert kit.memory.plans[plan_id].context.state["note"] == "first"


async def test_a_failed_action_takes_the_failure_branch_and_the_goal_gets_an_error() -> None:
    async with AgentTestKit(research_planner(), search_tool()) as kit:
        goal = await kit.request("research.goal", {"topic": "boom", "hits": 1}, response_event="r")

    result = kit.result_of(goal)
    assert result.success is False
    assert result.error is not None
    assert "failure state 'failed'" in result.error.message
    assert [e.type for e in kit.system_events()][-1] == "plan.failed"


async def test_a_conditional_transition_routes_on_the_answer_and_pauses_for_a_human() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, search_tool()) as kit:
        goal = await kit.request(
            "research.goal", {"topic": "nothing", "hits": 0}, response_event="r"
        )
        (question,) = kit.questions()
        plan = await planner.find_plan(question.correlation_id or "")
        assert plan is not None
        paused_status = plan.status
        await kit.answer_human(answer="yes")

    assert paused_status is PlanStatus.PAUSED
    assert question.data["question"] == "Nothing found for nothing. Give up?"  # type: ignore[index,call-overload]
    assert kit.result_of(goal).success is True
    types = [e.type for e in kit.system_events()]
    assert types.index("plan.paused") < types.index("plan.resumed") < types.index("plan.completed")


async def test_an_answer_that_arrives_twice_moves_the_plan_once() -> None:
    planner = research_planner()
    async with AgentTestKit(planner, loopback=False) as kit:
        goal = await kit.request("research.goal", {"topic": "x", "hits": 1}, response_event="r")
        await kit.settle()
        (search,) = kit.requests("search.requested")
        await kit.reply(search, {"query": "x", "count": 1})
        await kit.reply(search, {"query": "x", "count": 1})

    assert len(kit.requests("summarize.requested")) == 1
    assert kit.answers(goal.correlation_id) == []


async def test_a_template_naming_a_missing_field_fails_the_plan_with_the_known_fields() -> None:
    async with AgentTestKit(research_planner(), search_tool()) as kit:
        goal = await kit.request("research.goal", {"topik": "typo"}, response_event="r")

    result = kit.result_of(goal)
    assert result.success is False
    assert result.error is not None
    assert "goal_data has no 'topic'" in result.error.message
    assert "topik" in result.error.message


async def test_a_plan_can_be_paused_and_resumed_and_answers_meanwhile_are_held() -> None:
    planner = Planner("gatekeeper", register=False)
    states = [
        StateConfig(state_name="start", default_next="quoting"),
        StateConfig(
            state_name="quoting",
            action=StateAction(event_type="quote.requested", response_event="quote.done"),
            transitions=[StateTransition(on_event="quote.done", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ]

    @planner.on_goal("budget.goal")
    async def start(goal: GoalContext[Any]) -> None:
        plan = await goal.start_plan(states)
        await plan.pause("budget approval required")

    @planner.on_event(topic="business-facts", event_type="budget.approved")
    async def approved(event: Any) -> None:
        plan = await planner.restore_plan(event.data["plan_id"])
        assert plan is not None
        await plan.resume({"approved_by": event.data["by"]})

    async with AgentTestKit(planner, loopback=False) as kit:
        goal = await kit.request("budget.goal", {}, response_event="budget.done")
        (quote,) = kit.requests("quote.requested")
        await kit.reply(quote, {"price": 10})
        held = kit.answers(goal.correlation_id)
        await kit.publish(
            "business-facts", "budget.approved", {"plan_id": quote.plan_id, "by": "carol"}
        )

    assert held == []
    result = kit.result_of(goal)
    assert result.result == {"quoting": {"price": 10}, "user_input": {"approved_by": "carol"}}
    types = [e.type for e in kit.system_events()]
    assert "plan.paused" in types
    assert "plan.resumed" in types


def booking_plan() -> PlanDefinition:
    """A sub-plan: search a hotel in ``goal_data.city``, then done."""
    return PlanDefinition(
        plan_type="booking",
        states=[
            StateConfig(state_name="start", default_next="searching"),
            StateConfig(
                state_name="searching",
                action=StateAction(
                    event_type="search.requested",
                    response_event="hotel.found",
                    data={"query": "hotel in {goal_data.city}", "hits": 2},
                ),
                transitions=[StateTransition(on_event="hotel.found", to_state="done")],
            ),
            StateConfig(state_name="done", is_terminal=True),
        ],
    )


async def test_a_state_action_can_start_a_nested_sub_plan_of_another_planner() -> None:
    parent, child = Planner("parent", register=False), Planner("child", register=False)
    parent.add_plan(
        "trip.goal",
        PlanDefinition(
            plan_type="trip",
            states=[
                StateConfig(state_name="start", default_next="booking"),
                StateConfig(
                    state_name="booking",
                    action=StateAction(
                        event_type="booking.goal",
                        response_event="booking.done",
                        data={"city": "{goal_data.city}"},
                    ),
                    transitions=[StateTransition(on_event="booking.done", to_state="done")],
                ),
                StateConfig(state_name="done", is_terminal=True),
            ],
        ),
    )
    child.add_plan("booking.goal", booking_plan())

    async with AgentTestKit(parent, child, search_tool()) as kit:
        goal = await kit.request("trip.goal", {"city": "Lyon"}, response_event="trip.done")

    result = kit.result_of(goal)
    assert result.result == {
        "booking": {"searching": {"query": "hotel in Lyon", "count": 2}},
    }
    started = kit.system_events("plan.started")
    parent_id = started[0].data["plan_id"]  # type: ignore[index,call-overload]
    assert started[1].data["parent_plan_id"] == parent_id  # type: ignore[index,call-overload]


async def test_an_on_transition_handler_takes_over_moving_the_plan() -> None:
    planner = Planner("counting", register=False)
    seen: list[str | None] = []
    states = [
        StateConfig(state_name="start", default_next="asking"),
        StateConfig(
            state_name="asking",
            action=StateAction(
                event_type="search.requested",
                response_event="asked",
                data={"query": "q", "hits": 5},
            ),
            transitions=[StateTransition(on_event="asked", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ]

    @planner.on_goal("count.goal")
    async def start(goal: GoalContext[Any]) -> None:
        await goal.start_plan(states)

    @planner.on_transition()
    async def decide(transition: TransitionContext) -> None:
        seen.append(transition.next_state)
        transition.plan.record(transition)
        await transition.plan.finalize({"count": transition.result["count"]})  # type: ignore[index,call-overload]

    async with AgentTestKit(planner, search_tool()) as kit:
        goal = await kit.request("count.goal", {}, response_event="counted")

    assert seen == ["done"]
    assert kit.result_of(goal).result == {"count": 5}


async def test_a_goal_handler_that_raises_answers_the_goal_with_the_error() -> None:
    planner = Planner("broken", register=False)

    @planner.on_goal("broken.goal")
    async def start(goal: GoalContext[Any]) -> None:
        raise ValueError("no plan for you")

    async with AgentTestKit(planner) as kit:
        goal = await kit.request("broken.goal", {}, response_event="r")

    result = kit.result_of(goal)
    assert result.error is not None
    assert result.error.message == "no plan for you"


async def test_an_llm_can_write_the_plan_and_its_mistake_is_sent_back_once() -> None:
    bad = '{"plan_type": "x", "states": [{"state_name": "start", "default_next": "nowhere"}]}'
    good = """```json
    {"plan_type": "llm.research", "initial_state": "start",
     "states": [
       {"state_name": "start", "default_next": "searching"},
       {"state_name": "searching",
        "action": {"event_type": "search.requested", "response_event": "found",
                   "data": {"query": "{goal_data.topic}", "hits": 1}},
        "transitions": [{"on_event": "found", "to_state": "done", "condition": "success"}]},
       {"state_name": "done", "is_terminal": true}]}
    ```"""
    llm = ScriptedDriver([bad, good])
    planner = Planner("thinker", register=False, llm=llm)

    @planner.on_goal("think.goal")
    async def start(goal: GoalContext[Any]) -> None:
        plan = await planner.create_plan(goal, agents=[])
        await plan.start()

    async with AgentTestKit(planner, search_tool()) as kit:
        goal = await kit.request("think.goal", {"topic": "cel"}, response_event="r")

    assert kit.result_of(goal).result == {"searching": {"query": "cel", "count": 1}}
    assert len(llm.calls) == 2
    assert "nowhere" in llm.calls[1][-1]["content"]


async def test_asking_for_llm_reasoning_without_an_llm_says_how_to_add_one() -> None:
    from disco.agents import AgentError

    planner = Planner("plain", register=False)

    @planner.on_goal("think.goal")
    async def start(goal: GoalContext[Any]) -> None:
        with pytest.raises(AgentError, match="needs an LLM"):
            await planner.create_plan(goal)
        await goal.complete("without llm")

    async with AgentTestKit(planner) as kit:
        goal = await kit.request("think.goal", {}, response_event="r")

    assert kit.result_of(goal).result == "without llm"


def test_an_invalid_state_machine_fails_when_the_plan_is_added() -> None:
    planner = Planner("broken", register=False)

    with pytest.raises(PlanError, match="unknown state"):
        planner.add_plan(
            "x.goal",
            PlanDefinition.model_construct(
                plan_type="x",
                initial_state="start",
                states={"start": StateConfig(state_name="start", default_next="nowhere")},
            ),
        )


async def test_a_plan_paused_before_it_starts_starts_when_resumed() -> None:
    planner = Planner("gate", register=False)
    states = [
        StateConfig(state_name="start", default_next="searching"),
        StateConfig(
            state_name="searching",
            action=StateAction(
                event_type="search.requested",
                response_event="found",
                data={"query": "q", "hits": 1},
            ),
            transitions=[StateTransition(on_event="found", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ]

    @planner.on_goal("gated.goal")
    async def start(goal: GoalContext[Any]) -> None:
        await goal.new_plan(states).pause("closed")

    @planner.on_event(topic="business-facts", event_type="gate.opened")
    async def open_gate(event: Any) -> None:
        plan = await planner.restore_plan(event.data["plan_id"])
        assert plan is not None
        await plan.resume()

    async with AgentTestKit(planner, search_tool()) as kit:
        goal = await kit.request("gated.goal", {}, response_event="r")
        before = list(kit.requests("search.requested"))
        (paused,) = kit.system_events("plan.paused")
        await kit.publish("business-facts", "gate.opened", {"plan_id": paused.data["plan_id"]})  # type: ignore[index,call-overload]

    assert before == []
    assert kit.result_of(goal).result == {"searching": {"query": "q", "count": 1}}


async def test_a_goal_redelivered_after_a_crash_before_publishing_sends_its_first_action() -> None:
    from disco.bus import PublishError

    planner = research_planner()
    async with AgentTestKit(planner, search_tool(), raise_errors=False) as kit:
        bus = kit._members[0].bus
        write = bus._write_envelope
        failures: list[str] = []

        async def broker_gone_once(name: str, envelope: Any, *receiver: Any) -> Any:
            if envelope.type == "search.requested" and not failures:
                failures.append(envelope.id)
                raise PublishError("the broker went away")
            return await write(name, envelope, *receiver)

        bus._write_envelope = broker_gone_once  # type: ignore[method-assign]
        goal = await kit.request("research.goal", {"topic": "x", "hits": 1}, response_event="r")
        assert kit.requests("search.requested") == []
        kit._members[0].seen.clear()  # the bus redelivers the uncommitted goal
        await kit.deliver("action-requests", goal)
        await kit.settle()

    assert len(failures) == 1
    assert kit.result_of(goal).success is True


def test_a_planner_with_only_declared_plans_subscribes_to_exactly_their_answers() -> None:
    planner = research_planner()
    planner._check_ready_to_start()

    assert sorted(planner.routes) == [
        ("action-requests", "research.goal"),
        ("action-results", "search.done"),
        ("action-results", "summary.done"),
        ("notification-events", "research.clarified"),
    ]


def test_a_planner_with_its_own_goal_handler_reads_every_answer_type() -> None:
    planner = Planner("free-form", register=False)

    @planner.on_goal("free.goal")
    async def start(goal: GoalContext[Any]) -> None:
        await goal.complete()

    planner._check_ready_to_start()

    assert ("action-results", "*") in planner.routes
    assert ("notification-events", "*") in planner.routes
