"""Continuation criteria: each stops a loop for its reason, every verdict is recorded."""

from __future__ import annotations

from typing import Any

import pytest

from disco.runtime import (
    AgentState,
    AgentStatus,
    CollectingSink,
    ContinuationEvaluated,
    Decision,
    ErrorLimit,
    FinishReason,
    ScriptedReply,
    StepCompleted,
    StepsLimit,
    StopReason,
    TimeLimit,
    TokenBudget,
    ToolCallPresence,
    Usage,
    agent_tool,
)
from libs.sdk.tests.runtime._helpers import call, runner


def forever(count: int = 20) -> list[Any]:
    """A model that keeps asking for the weather."""
    return [call("lookup_weather", city="Oslo") for _ in range(count)]


def verdicts(state: AgentState) -> dict[str, str]:
    assert state.last_continuation is not None
    return {e.criterion: e.decision.value for e in state.last_continuation.evaluations}


async def test_a_final_answer_completes_the_loop_resolved_by_tool_call_presence() -> None:
    agent, _ = runner(["Hello."], criteria=[StepsLimit(5)])

    state = await agent.send(agent.new_state("s"), "Hi")

    outcome = state.last_continuation
    assert outcome is not None
    assert outcome.should_continue is False
    assert outcome.stop_reason == StopReason.COMPLETED
    assert outcome.resolved_by == "ToolCallPresence"
    assert verdicts(state) == {"ToolCallPresence": "allow", "StepsLimit": "allow"}
    assert state.status is AgentStatus.COMPLETED


async def test_steps_limit_stops_a_model_that_never_answers() -> None:
    agent, driver = runner(forever(), criteria=[StepsLimit(3)])

    state = await agent.send(agent.new_state("s"), "Weather?")

    assert len(driver.requests) == 3
    assert state.status is AgentStatus.FAILED
    assert state.last_continuation is not None
    assert state.last_continuation.stop_reason == StopReason.STEPS_LIMIT
    assert state.last_continuation.resolved_by == "StepsLimit"
    assert verdicts(state) == {"ToolCallPresence": "request", "StepsLimit": "forbid"}
    assert "steps_limit" in (state.error or "")
    assert state.execution_buffer == ()


async def test_token_budget_stops_once_the_steps_used_it() -> None:
    costly = [
        ScriptedReply(
            tool_calls=[("lookup_weather", {"city": "Oslo"})],
            usage=Usage.of(prompt_tokens=300, completion_tokens=100),
        )
        for _ in range(10)
    ]
    agent, driver = runner(costly, criteria=[TokenBudget(1000), StepsLimit(50)])

    state = await agent.send(agent.new_state("s"), "Weather?")

    assert len(driver.requests) == 3  # 400, 800, 1200 tokens
    assert state.last_continuation is not None
    assert state.last_continuation.stop_reason == StopReason.TOKEN_BUDGET
    assert state.last_continuation.resolved_by == "TokenBudget"
    assert state.usage.total_tokens == 1200


class FakeClock:
    """The loop's clock, moved by the test (no waiting)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr("disco.runtime._runner._monotonic", fake)
    return fake


async def test_time_limit_counts_the_running_time_of_the_execution(clock: FakeClock) -> None:
    @agent_tool
    async def slow(city: str) -> str:
        """Takes 40 seconds."""
        clock.now += 40
        return city

    agent, driver = runner(
        [call("slow", city="Oslo") for _ in range(50)],
        tools=[slow],
        criteria=[TimeLimit(100), StepsLimit(50)],
    )

    state = await agent.send(agent.new_state("s"), "Go")

    assert len(driver.requests) == 3  # 40, 80, 120 seconds
    assert state.last_continuation is not None
    assert state.last_continuation.stop_reason == StopReason.TIME_LIMIT
    assert state.execution.execution_seconds == 120


async def test_time_spent_waiting_for_approval_does_not_count(clock: FakeClock) -> None:
    agent, _ = runner(
        [call("book_trip", city="Oslo", date="2026-01-01"), "Booked."],
        criteria=[TimeLimit(30)],
    )
    waiting = await agent.send(agent.new_state("s"), "Book")
    clock.now += 3600  # a person thinks it over for an hour
    assert waiting.approval is not None

    decided = await agent.decide(waiting, waiting.approval.tool_call_id, approved=True)
    done = await agent.run(decided)

    assert done.status is AgentStatus.COMPLETED
    assert done.execution.execution_seconds == 0
    assert done.execution.cumulative_seconds == 0


async def test_finish_reason_stops_a_cut_off_answer() -> None:
    agent, _ = runner(
        [ScriptedReply(tool_calls=[("lookup_weather", {"city": "Oslo"})], finish_reason="length")],
        criteria=[FinishReason(), StepsLimit(5)],
    )

    state = await agent.send(agent.new_state("s"), "Weather?")

    assert state.last_continuation is not None
    assert state.last_continuation.stop_reason == StopReason.FINISH_REASON
    assert state.last_continuation.resolved_by == "FinishReason"
    assert verdicts(state)["ToolCallPresence"] == "request"


async def test_error_limit_stops_after_too_many_failed_calls() -> None:
    agent, _ = runner(
        [call("lookup_weather", town="Oslo") for _ in range(10)],  # wrong argument name
        criteria=[ErrorLimit(2), StepsLimit(10)],
    )

    state = await agent.send(agent.new_state("s"), "Weather?")

    assert state.last_continuation is not None
    assert state.last_continuation.stop_reason == StopReason.ERROR_LIMIT
    assert len(state.steps) == 2
    assert all(step.errors for step in state.steps)


async def test_a_user_function_can_stop_the_loop_with_its_reason() -> None:
    def no_oslo(state: AgentState) -> tuple[Decision, str]:
        called = [c.name for step in state.steps for c in step.tool_calls]
        if called.count("lookup_weather") >= 2:
            return Decision.FORBID, "enough weather"
        return Decision.ALLOW, "fine"

    agent, _ = runner(forever(), criteria=[no_oslo, StepsLimit(10)])

    state = await agent.send(agent.new_state("s"), "Weather?")

    assert state.last_continuation is not None
    assert state.last_continuation.resolved_by == "no_oslo"
    assert state.last_continuation.stop_reason == StopReason.USER_CRITERION
    evaluation = next(e for e in state.last_continuation.evaluations if e.criterion == "no_oslo")
    assert evaluation.reason == "enough weather"


async def test_a_criterion_that_raises_stops_the_loop_and_says_why() -> None:
    def broken(state: AgentState) -> bool:
        raise KeyError("oops")

    agent, _ = runner(forever(), criteria=[broken])

    state = await agent.send(agent.new_state("s"), "Weather?")

    assert state.last_continuation is not None
    assert state.last_continuation.resolved_by == "broken"
    assert "KeyError" in state.last_continuation.evaluations[-1].reason


async def test_every_step_records_its_outcome_in_an_event() -> None:
    agent, _ = runner([call("lookup_weather", city="Oslo"), "Snow."], criteria=[StepsLimit(4)])
    events = CollectingSink()

    await agent.send(agent.new_state("s"), "Weather?", events=events)

    outcomes = [e.outcome for e in events.of(ContinuationEvaluated)]
    assert [o.should_continue for o in outcomes] == [True, False]
    assert [o.step_number for o in outcomes] == [1, 2]
    assert [e.continuation for e in events.of(StepCompleted)] == outcomes


def test_tool_call_presence_is_always_among_the_criteria() -> None:
    agent, _ = runner([], criteria=[StepsLimit(2)])

    assert [c.name for c in agent.criteria.criteria] == ["ToolCallPresence", "StepsLimit"]
    assert isinstance(agent.criteria.criteria[0], ToolCallPresence)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: StepsLimit(0), "max_steps"),
        (lambda: TokenBudget(0), "max_tokens"),
        (lambda: TimeLimit(0), "max_seconds"),
        (lambda: ErrorLimit(0), "max_errors"),
    ],
)
def test_limits_must_be_positive(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_something_that_is_not_a_criterion_is_refused() -> None:
    with pytest.raises(TypeError, match="not a continuation criterion"):
        runner([], criteria=[42])  # type: ignore[list-item]
