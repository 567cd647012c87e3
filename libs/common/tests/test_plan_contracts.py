"""PlanDefinition checks its state machine's structure when it is built."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from disco_common.plans import PlanContextData, PlanDefinition, PlanStatus, StateConfig


def _state(name: str, **fields: Any) -> dict[str, Any]:
    return {"state_name": name, "description": name, **fields}


def _on(event: str, to: str, condition: str | None = None) -> dict[str, Any]:
    return {"on_event": event, "to_state": to, "condition": condition}


def _action(event: str = "step.requested") -> dict[str, Any]:
    return {"event_type": event, "response_event": event.replace("requested", "completed")}


def _research_states() -> dict[str, dict[str, Any]]:
    return {
        "start": _state("start", default_next="searching"),
        "searching": _state(
            "searching",
            action=_action("web.search.requested"),
            transitions=[
                _on("web.search.completed", "analyzing"),
                _on("web.search.failed", "retry_search"),
                _on("web.search.no_results", "ask_user"),
            ],
        ),
        "retry_search": _state(
            "retry_search",
            action=_action("web.search.requested"),
            transitions=[
                _on("web.search.completed", "analyzing"),
                _on("web.search.failed", "failed"),
            ],
        ),
        "ask_user": _state(
            "ask_user",
            action={
                "event_type": "notification.human_input",
                "response_event": "user.clarification.provided",
                "topic": "notification-events",
                "data": {"question": "No results. More details?"},
            },
            transitions=[_on("user.clarification.provided", "searching")],
        ),
        "analyzing": _state(
            "analyzing",
            action=_action("content.analyze.requested"),
            transitions=[
                _on("content.analyze.completed", "done", condition="data.confidence >= 0.5"),
                _on("content.analyze.completed", "failed"),
            ],
        ),
        "done": _state("done", is_terminal=True),
        "failed": _state("failed", is_terminal=True),
    }


def _plan(states: Any, **fields: Any) -> PlanDefinition:
    return PlanDefinition.model_validate({"plan_type": "research.plan", "states": states, **fields})


def test_seed_research_plan_with_branches_and_a_human_step_is_accepted() -> None:
    plan = _plan(_research_states())

    assert plan.initial_state == "start"
    assert sorted(plan.terminal_states) == ["done", "failed"]
    assert plan.states["ask_user"].action is not None
    assert plan.states["ask_user"].action.topic == "notification-events"


def test_states_may_be_given_as_a_list_keyed_by_name() -> None:
    plan = _plan(list(_research_states().values()))

    assert set(plan.states) == set(_research_states())


def test_a_state_defined_twice_in_a_list_is_rejected() -> None:
    states = [*_research_states().values(), _state("done", is_terminal=True)]

    with pytest.raises(ValidationError, match="'done' is defined twice"):
        _plan(states)


def test_a_state_key_that_differs_from_its_name_is_rejected() -> None:
    states = _research_states()
    states["finished"] = states.pop("done")

    with pytest.raises(ValidationError, match="keys must be names"):
        _plan(states)


def test_a_missing_initial_state_is_rejected_listing_the_known_states() -> None:
    with pytest.raises(ValidationError, match=r"initial_state 'begin' is not a state; known"):
        _plan(_research_states(), initial_state="begin")


def test_a_transition_to_an_unknown_state_is_rejected() -> None:
    states = _research_states()
    states["searching"]["transitions"].append(_on("web.search.timeout", "give_up"))

    with pytest.raises(ValidationError, match="unknown state 'give_up'"):
        _plan(states)


def test_a_default_next_to_an_unknown_state_is_rejected() -> None:
    states = _research_states()
    states["start"]["default_next"] = "nowhere"

    with pytest.raises(ValidationError, match="unknown state 'nowhere'"):
        _plan(states)


def test_a_terminal_state_with_an_action_is_rejected() -> None:
    with pytest.raises(ValidationError, match="terminal state 'done' must not have"):
        StateConfig.model_validate(_state("done", is_terminal=True, action=_action()))


def test_a_terminal_state_with_transitions_is_rejected() -> None:
    states = _research_states()
    states["done"]["transitions"] = [_on("again.requested", "start")]

    with pytest.raises(ValidationError, match="terminal state 'done' must not have"):
        _plan(states)


def test_a_plan_without_a_reachable_terminal_state_is_rejected() -> None:
    states = {
        "start": _state("start", default_next="loop"),
        "loop": _state("loop", action=_action(), transitions=[_on("step.completed", "start")]),
        "done": _state("done", is_terminal=True),
    }

    with pytest.raises(ValidationError, match="no terminal state is reachable from 'start'"):
        _plan(states)


def test_a_plan_without_any_terminal_state_is_rejected() -> None:
    states = {"start": _state("start", default_next="start")}

    with pytest.raises(ValidationError, match="no terminal state is reachable"):
        _plan(states)


def test_a_non_terminal_state_without_a_way_out_is_rejected() -> None:
    states = _research_states()
    states["analyzing"]["transitions"] = []

    with pytest.raises(ValidationError, match="'analyzing' is not terminal but has no"):
        _plan(states)


def test_a_plan_needs_at_least_one_state() -> None:
    with pytest.raises(ValidationError, match="states"):
        _plan({})


def test_a_plan_context_may_hold_a_partial_state_machine() -> None:
    # An LLM-reasoned plan grows while it runs: no terminal state yet is fine here.
    context = PlanContextData(
        plan_id="plan-1",
        goal_event="research.goal",
        response_event="research.completed",
        state_machine=[_state("start", default_next="searching")],  # type: ignore[arg-type]
        current_state="start",
        status=PlanStatus.RUNNING,
    )

    assert list(context.state_machine) == ["start"]


def test_a_plan_context_current_state_must_be_one_of_its_states() -> None:
    with pytest.raises(ValidationError, match="current_state 'elsewhere'"):
        PlanContextData.model_validate(
            {
                "plan_id": "plan-1",
                "goal_event": "research.goal",
                "response_event": "research.completed",
                "state_machine": _research_states(),
                "current_state": "elsewhere",
            }
        )


def test_final_plan_statuses_are_completed_and_failed() -> None:
    assert {status for status in PlanStatus if status.is_final} == {
        PlanStatus.COMPLETED,
        PlanStatus.FAILED,
    }
