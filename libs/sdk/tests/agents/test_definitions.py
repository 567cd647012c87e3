"""Mistakes in declaring an agent fail when the decorator runs, with a message saying what to do."""

from __future__ import annotations

from typing import Any

import pytest

from disco.agents import (
    Agent,
    AgentDefinitionError,
    HandlerSignatureError,
    InvocationContext,
    Planner,
    TaskContext,
    Tool,
    Worker,
)
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from libs.sdk.tests.agents._agents import Addition, Total


def test_on_event_without_a_topic_fails_and_names_the_topics() -> None:
    agent = Agent("watcher", register=False)

    with pytest.raises(AgentDefinitionError, match="explicit topic") as caught:
        agent.on_event(event_type="order.placed")

    assert "business-facts" in str(caught.value)
    assert "never infers" in str(caught.value)


def test_on_event_without_an_event_type_fails() -> None:
    agent = Agent("watcher", register=False)

    with pytest.raises(AgentDefinitionError, match="needs an event_type"):
        agent.on_event(topic=Topic.BUSINESS_FACTS)


def test_a_handler_that_is_not_async_is_refused() -> None:
    agent = Agent("watcher", register=False)

    def handler(event: Envelope) -> None:
        return None

    with pytest.raises(HandlerSignatureError, match="must be `async def`"):
        agent.on_event(topic="business-facts", event_type="order.placed")(handler)


def test_a_handler_with_too_many_required_parameters_is_refused() -> None:
    tool = Tool("calculator", register=False)

    async def handler(request: Any, context: Any, extra: Any) -> None:
        return None

    with pytest.raises(HandlerSignatureError, match="cannot call") as caught:
        tool.on_invoke("add.requested")(handler)

    assert "async def handler(request" in str(caught.value)


def test_a_task_handler_annotated_with_the_wrong_context_is_refused() -> None:
    worker = Worker("researcher", register=False)

    async def handler(task: InvocationContext[Any]) -> None:
        return None

    with pytest.raises(HandlerSignatureError, match="TaskContext"):
        worker.on_task("research.requested")(handler)


def test_a_second_handler_for_the_same_event_fails_at_once() -> None:
    tool = Tool("calculator", register=False)

    @tool.on_invoke("add.requested")
    async def first(request: Addition) -> Total:
        return Total(total=0)

    with pytest.raises(AgentDefinitionError, match=r"already handles .add\.requested."):

        @tool.on_invoke("add.requested")
        async def second(request: Addition) -> Total:
            return Total(total=1)


def test_the_decorator_returns_the_handler_unchanged() -> None:
    worker = Worker("researcher", register=False)

    async def handler(task: TaskContext[Addition]) -> None:
        return None

    assert worker.on_task("research.requested")(handler) is handler


def test_an_invalid_agent_name_fails_when_the_agent_is_made() -> None:
    with pytest.raises(AgentDefinitionError, match="not valid"):
        Tool("no spaces allowed", register=False)


async def test_starting_an_agent_without_handlers_says_to_add_some() -> None:
    worker = Worker("idle", register=False)

    with pytest.raises(AgentDefinitionError, match="has no handlers"):
        await worker.start()


def test_a_tools_type_hints_become_its_registered_request_and_response_schemas() -> None:
    tool = Tool("calculator", register=False, version="1.2.0")

    @tool.on_invoke("add.requested")
    async def add(request: Addition) -> Total:
        """Adds two integers."""
        return Total(total=request.a + request.b)

    registration = tool.registration()

    (capability,) = registration.capabilities
    assert capability.task_name == "add"
    assert capability.description == "Adds two integers."
    assert capability.consumed_event.event_type == "add.requested"
    assert capability.consumed_event.json_schema is not None
    assert capability.consumed_event.json_schema["required"] == ["a", "b"]
    (produced,) = capability.produced_events
    assert produced.topic == "action-results"
    assert produced.json_schema is not None
    result_schema = produced.json_schema["properties"]["result"]
    assert result_schema["required"] == ["total"]
    assert registration.version == "1.2.0"
    assert registration.metadata["kind"] == "tool"


def test_a_raw_agents_events_are_registered_outside_capabilities() -> None:
    agent = Agent("auditor", register=False)

    @agent.on_event(topic="business-facts", event_type="order.placed")
    async def audit(event: Envelope) -> None:
        return None

    registration = agent.registration()

    assert registration.capabilities == []
    assert [(e.topic, e.event_type) for e in registration.events] == [
        ("business-facts", "order.placed")
    ]


def test_a_plan_with_a_condition_that_is_not_cel_fails_when_added() -> None:
    from disco.agents import PlanError
    from disco_common.plans import PlanDefinition, StateConfig, StateTransition

    planner = Planner("travel", register=False)
    definition = PlanDefinition(
        plan_type="trip",
        states=[
            StateConfig(state_name="start", default_next="wait"),
            StateConfig(
                state_name="wait",
                transitions=[
                    StateTransition(on_event="x.done", to_state="done", condition="result.count >")
                ],
            ),
            StateConfig(state_name="done", is_terminal=True),
        ],
    )

    with pytest.raises(PlanError, match="not valid CEL"):
        planner.add_plan("trip.requested", definition)


def test_a_condition_naming_an_unknown_variable_fails_and_lists_the_known_ones() -> None:
    from disco.agents import PlanError
    from disco_common.plans import PlanDefinition, StateConfig, StateTransition

    planner = Planner("travel", register=False)
    definition = PlanDefinition(
        plan_type="trip",
        states=[
            StateConfig(state_name="start", default_next="wait"),
            StateConfig(
                state_name="wait",
                transitions=[
                    StateTransition(on_event="x.done", to_state="done", condition="reslt.ok")
                ],
            ),
            StateConfig(state_name="done", is_terminal=True),
        ],
    )

    with pytest.raises(PlanError, match="unknown variable") as caught:
        planner.add_plan("trip.requested", definition)

    assert "goal_data" in str(caught.value)
