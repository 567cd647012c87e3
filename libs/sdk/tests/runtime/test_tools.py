"""Tools: typed functions, schemas from type hints, validation, approval policies, logs."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from disco.runtime import (
    AgentStatus,
    AgentTool,
    CollectingSink,
    ScriptedReply,
    ToolArgumentsError,
    ToolFinished,
    ToolLogged,
    ToolStarted,
    agent_tool,
    tool_log,
)
from libs.sdk.tests.runtime._helpers import call, lookup_weather, runner


class Trip(BaseModel):
    city: str
    nights: int = 1


def test_the_schema_comes_from_the_type_hints() -> None:
    @agent_tool
    def plan(
        trip: Trip,
        budget: Annotated[float, Field(gt=0, description="In euros.")],
        tags: list[str] | None = None,
    ) -> str:
        """Plan a trip.

        Longer text the model does not need.
        """
        return "planned"

    spec = plan.spec()

    assert spec.name == "plan"
    assert spec.description == "Plan a trip."
    assert spec.parameters["required"] == ["trip", "budget"]
    assert spec.parameters["properties"]["budget"]["description"] == "In euros."
    assert spec.parameters["properties"]["budget"]["exclusiveMinimum"] == 0
    assert spec.parameters["additionalProperties"] is False
    assert "Trip" in spec.parameters["$defs"]


def test_arguments_are_validated_before_the_call() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        lookup_weather.validate({"town": "Oslo"})

    assert "invalid arguments for lookup_weather" in str(caught.value)
    assert "city: Field required" in str(caught.value)
    assert "town: Extra inputs are not permitted" in str(caught.value)


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (lambda city: city, "has no type hint"),
        (lambda *cities: cities, "must be named"),
    ],
)
def test_a_tool_the_model_could_not_call_is_refused_when_defined(
    function: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        AgentTool(function, name="bad")


def test_a_tool_name_models_refuse_is_refused() -> None:
    with pytest.raises(TypeError, match="not valid"):
        AgentTool(lambda: None, name="has spaces")


async def test_invalid_arguments_go_back_to_the_model_as_the_tool_result() -> None:
    agent, driver = runner([call("lookup_weather", town="Oslo"), "Sorry, which city?"])
    events = CollectingSink()

    state = await agent.send(agent.new_state("s"), "Weather?", events=events)

    assert state.status is AgentStatus.COMPLETED
    result = driver.requests[1].messages[-1]
    assert result.role == "tool"
    assert result.content.startswith("error: invalid arguments for lookup_weather")
    (finished,) = events.of(ToolFinished)
    assert (finished.success, finished.executed) == (False, False)
    assert events.of(ToolStarted) == []
    assert state.steps[0].errors


async def test_arguments_that_are_not_json_go_back_to_the_model_too() -> None:
    agent_bad, driver_bad = runner(
        [ScriptedReply(tool_calls=[("lookup_weather", "{not json")]), "Ok."]
    )

    await agent_bad.send(agent_bad.new_state("s"), "Weather?")

    assert "not valid JSON" in driver_bad.requests[1].messages[-1].content


async def test_an_unknown_tool_is_answered_with_the_known_ones() -> None:
    agent, driver = runner([call("teleport", to="Mars"), "I cannot."])

    await agent.send(agent.new_state("s"), "Go to Mars")

    content = driver.requests[1].messages[-1].content
    assert "unknown tool 'teleport'" in content
    assert "lookup_weather" in content


async def test_a_tool_that_raises_fails_its_call_not_the_execution() -> None:
    @agent_tool
    def broken(city: str) -> str:
        """Always fails."""
        raise ConnectionError("weather service down")

    agent, driver = runner([call("broken", city="Oslo"), "It failed."], tools=[broken])
    events = CollectingSink()

    state = await agent.send(agent.new_state("s"), "Weather?", events=events)

    assert state.status is AgentStatus.COMPLETED
    assert driver.requests[1].messages[-1].content == "error: ConnectionError: weather service down"
    (finished,) = events.of(ToolFinished)
    assert finished.success is False
    assert isinstance(finished.error, ConnectionError)


async def test_sync_tools_run_in_a_thread_and_can_log() -> None:
    threads: list[str] = []

    @agent_tool
    def lookup(city: str) -> str:
        """Looks up."""
        threads.append(threading.current_thread().name)
        tool_log(f"asking the service about {city}", level="debug")
        return city

    agent, _ = runner([call("lookup", city="Oslo"), "Done."], tools=[lookup])
    events = CollectingSink()

    await agent.send(agent.new_state("s"), "Go", events=events)

    assert threads[0] != threading.main_thread().name
    (logged,) = events.of(ToolLogged)
    assert (logged.tool_name, logged.level, logged.message) == (
        "lookup",
        "debug",
        "asking the service about Oslo",
    )
    kinds = [type(e).__name__ for e in events.events]
    assert kinds.index("ToolStarted") < kinds.index("ToolLogged") < kinds.index("ToolFinished")


def test_tool_log_outside_a_tool_does_nothing() -> None:
    tool_log("nobody listens")


async def test_an_approval_policy_can_depend_on_the_arguments() -> None:
    @agent_tool(approval=lambda arguments: arguments["amount"] > 100)
    def pay(amount: int) -> str:
        """Pays."""
        return f"paid {amount}"

    agent, _ = runner([call("pay", amount=20), call("pay", amount=500)], tools=[pay])

    state = await agent.send(agent.new_state("s"), "Pay")

    assert state.status is AgentStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert state.approval.arguments == {"amount": 500}
    assert [m.content for m in state.execution_buffer if m.role == "tool"] == ["paid 20"]


def test_redaction_hides_what_approvers_should_not_see() -> None:
    @agent_tool(
        redact=lambda arguments: {"to": arguments["to"], "iban": "…" + arguments["iban"][-4:]}
    )
    def transfer(to: str, iban: str) -> str:
        """Transfers."""
        return "ok"

    arguments = transfer.validate({"to": "Ada", "iban": "DE89370400440532013000"}).model_dump()

    assert transfer.shown_arguments(arguments) == {"to": "Ada", "iban": "…3000"}


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(TypeError, match="two tools are named 'lookup_weather'"):
        runner([], tools=[lookup_weather, lookup_weather])
