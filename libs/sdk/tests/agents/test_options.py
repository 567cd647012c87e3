"""The agent options are defined once (``AgentOptions``) and every layer takes them alike."""

from __future__ import annotations

import inspect

import pytest

from disco.agents import Agent, AgentOptions, Planner, Tool, Worker
from disco.testing import InMemoryMemory
from disco_common.registry import EventDefinition, EventDirection, Visibility

LAYERS: list[tuple[type[Agent], set[str]]] = [
    (Agent, {"name"}),
    (Tool, {"name"}),
    (Worker, {"name", "task_ttl_seconds"}),
    (Planner, {"name", "llm"}),
]


@pytest.mark.parametrize(("layer", "own"), LAYERS, ids=lambda item: getattr(item, "__name__", ""))
def test_each_layer_takes_the_agent_options_as_one_typed_keyword_set(
    layer: type[Agent], own: set[str]
) -> None:
    parameters = inspect.signature(layer).parameters.values()
    named = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD}
    (rest,) = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]

    assert named == own
    assert not named & AgentOptions.__optional_keys__
    assert rest.annotation == "Unpack[AgentOptions]"


def test_every_option_is_documented_where_it_is_defined() -> None:
    doc = AgentOptions.__doc__ or ""
    attributes = doc.split("Attributes:", 1)[1]
    documented = {
        line.strip().split(":", 1)[0]
        for line in attributes.splitlines()
        if line.startswith(" " * 8) and not line.startswith(" " * 12) and ":" in line
    }

    assert documented == set(AgentOptions.__optional_keys__)


def test_every_layer_registers_what_the_same_options_say() -> None:
    fact = EventDefinition(
        event_type="order.audited", topic="business-facts", direction=EventDirection.PRODUCED
    )
    options: AgentOptions = {
        "version": "2.3.4",
        "description": "Audits orders.",
        "events": [fact],
        "tags": ["audit", "orders"],
        "visibility": Visibility.PUBLIC,
        "ttl_seconds": 90,
        "register": False,
        "memory": InMemoryMemory(),
    }

    registrations = [layer("auditor", **options).registration() for layer, _ in LAYERS]

    for registration in registrations:
        assert registration.version == "2.3.4"
        assert registration.description == "Audits orders."
        assert registration.events == [fact]
        assert registration.tags == ["audit", "orders"]
        assert registration.visibility is Visibility.PUBLIC
        assert registration.ttl_seconds == 90
    assert [r.metadata["kind"] for r in registrations] == ["agent", "tool", "worker", "planner"]


def test_the_layers_defaults_are_those_of_a_plain_agent() -> None:
    plain = Agent("auditor").registration()

    for layer, _ in LAYERS[1:]:
        registration = layer("auditor").registration()
        assert (registration.version, registration.description, registration.tags) == (
            plain.version,
            plain.description,
            plain.tags,
        )
        assert registration.visibility is plain.visibility is Visibility.TENANT
        assert registration.ttl_seconds is plain.ttl_seconds is None


@pytest.mark.parametrize(("layer", "own"), LAYERS, ids=lambda item: getattr(item, "__name__", ""))
def test_a_keyword_that_is_no_option_fails_and_lists_the_options(
    layer: type[Agent], own: set[str]
) -> None:
    with pytest.raises(TypeError, match=rf"{layer.__name__}\(\).*'regster'") as raised:
        layer("auditor", regster=False)  # type: ignore[call-arg]

    assert "register" in str(raised.value).split("the agent options are:", 1)[1]
