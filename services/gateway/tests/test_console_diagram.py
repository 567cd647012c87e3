"""The console's state-machine drawing: layers from the initial state, the plan's place marked."""

from __future__ import annotations

from disco_common.plans import PlanDefinition, StateConfig, StateTransition
from disco_gateway.console.diagram import layout

PLAN = PlanDefinition(
    plan_type="trip.plan",
    initial_state="start",
    states=[
        StateConfig(
            state_name="start",
            transitions=[StateTransition(on_event="trip.booked", to_state="review")],
        ),
        StateConfig(
            state_name="review",
            transitions=[
                StateTransition(on_event="review.ok", to_state="done"),
                StateTransition(on_event="review.redo", to_state="start"),
            ],
        ),
        StateConfig(state_name="done", is_terminal=True),
    ],
)


def test_states_are_laid_out_left_to_right_by_distance_from_the_initial_state() -> None:
    diagram = layout(PLAN)
    x = {node.name: node.x for node in diagram.nodes}
    assert x["start"] < x["review"] < x["done"]
    assert all(node.x + node.width <= diagram.width for node in diagram.nodes)
    assert {(e.source, e.target, e.label) for e in diagram.edges} == {
        ("start", "review", "trip.booked"),
        ("review", "done", "review.ok"),
        ("review", "start", "review.redo"),
    }
    back = next(e for e in diagram.edges if e.target == "start")
    assert back.path.startswith("M")
    assert " C" in back.path


def test_the_current_state_and_the_moves_taken_are_marked() -> None:
    diagram = layout(
        PLAN, current_state="review", visited={"start", "review"}, taken={("start", "review")}
    )
    nodes = {node.name: node for node in diagram.nodes}
    assert nodes["review"].current
    assert "current" in nodes["review"].css_class
    assert nodes["start"].visited
    assert not nodes["start"].current
    assert not nodes["done"].visited
    assert nodes["done"].terminal
    assert [(e.source, e.target) for e in diagram.edges if e.taken] == [("start", "review")]
