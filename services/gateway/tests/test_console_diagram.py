"""The console's state-machine drawing: layers from the initial state, the plan's place marked."""

from __future__ import annotations

import itertools

from disco_common.plans import PlanDefinition, StateConfig, StateTransition
from disco_gateway.console.diagram import DiagramEdge, layout

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


TRIP = PlanDefinition(
    plan_type="trip",
    initial_state="start",
    states=[
        StateConfig(state_name="start", default_next="searching"),
        StateConfig(
            state_name="searching",
            transitions=[
                StateTransition(on_event="found", to_state="failed", condition="!success"),
                StateTransition(on_event="found", to_state="booking"),
                StateTransition(on_event="none", to_state="asking_human"),
            ],
        ),
        StateConfig(
            state_name="booking",
            transitions=[
                StateTransition(on_event="booked", to_state="failed", condition="!success"),
                StateTransition(on_event="booked", to_state="done"),
            ],
        ),
        StateConfig(
            state_name="asking_human",
            transitions=[
                StateTransition(on_event="decided", to_state="booking_boat"),
                StateTransition(on_event="decided.no", to_state="failed"),
                StateTransition(on_event="again", to_state="searching"),
            ],
        ),
        StateConfig(
            state_name="booking_boat",
            transitions=[StateTransition(on_event="boat.booked", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)


def _points(path: str) -> list[tuple[float, float]]:
    return [
        (float(x), float(y)) for x, y in (pair.split(",") for pair in path.lstrip("M").split(" L"))
    ]


def test_every_move_but_a_loop_points_right_and_no_arrow_crosses_a_box() -> None:
    diagram = layout(TRIP)
    nodes = {node.name: node for node in diagram.nodes}

    # A move between states a plain distance puts in one column (searching reaches
    # booking and failed alike; booking -> failed) still points right.
    assert nodes["booking"].x < nodes["failed"].x
    assert nodes["asking_human"].x < nodes["booking_boat"].x < nodes["done"].x
    for edge in diagram.edges:
        if (edge.source, edge.target) == ("asking_human", "searching"):
            assert " C" in edge.path  # the loop back arcs above the boxes
            continue
        assert nodes[edge.source].x < nodes[edge.target].x, edge
        points = _points(edge.path)
        source, target = nodes[edge.source], nodes[edge.target]
        assert points[0] == (float(source.x + source.width), source.y + source.height / 2)
        assert points[-1] == (float(target.x), target.y + target.height / 2)
        # Sampled along each stretch, no point is inside a box.
        for (ax, ay), (bx, by) in itertools.pairwise(points):
            for step in range(1, 50):
                x, y = ax + (bx - ax) * step / 50, ay + (by - ay) * step / 50
                inside = [
                    n.name
                    for n in diagram.nodes
                    if n.x < x < n.x + n.width and n.y < y < n.y + n.height
                ]
                assert not inside, f"{edge.source} -> {edge.target} crosses {inside}"
    assert all(node.x + node.width <= diagram.width for node in diagram.nodes)
    assert all(node.y + node.height <= diagram.height for node in diagram.nodes)


def test_labels_cover_no_box_and_no_other_label() -> None:
    diagram = layout(TRIP)

    def label_box(edge: DiagramEdge) -> tuple[float, float, float, float]:
        half = len(edge.label) * 6.0 / 2
        return (edge.label_x - half, edge.label_y - 10, edge.label_x + half, edge.label_y + 2)

    def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    nodes = [(n.x, n.y, n.x + n.width, n.y + n.height) for n in diagram.nodes]
    labels = [(f"{e.source}->{e.target}", label_box(e)) for e in diagram.edges]
    for name, box in labels:
        assert not [n for n in nodes if overlap(box, n)], f"the label of {name} covers a state"
        covered = [other for other, b in labels if other != name and overlap(box, b)]
        assert not covered, f"the label of {name} covers those of {covered}"
    conditional = next(e for e in diagram.edges if (e.source, e.target) == ("searching", "failed"))
    assert (conditional.label, conditional.condition) == ("found", "!success")


def _chain_with_exits(length: int) -> PlanDefinition:
    return PlanDefinition(
        plan_type="steps",
        initial_state="s0",
        states=[
            *(
                StateConfig(
                    state_name=f"s{i}",
                    transitions=[
                        StateTransition(on_event="next", to_state=f"s{i + 1}"),
                        StateTransition(on_event="quit", to_state="end"),
                    ],
                )
                for i in range(length)
            ),
            StateConfig(state_name=f"s{length}", default_next="end"),
            StateConfig(state_name="end", is_terminal=True),
            # Reached by no path: a last column, moving within it.
            StateConfig(
                state_name="u1", transitions=[StateTransition(on_event="e", to_state="u2")]
            ),
            StateConfig(
                state_name="u2", transitions=[StateTransition(on_event="e", to_state="u1")]
            ),
        ],
    )


def test_long_moves_loops_and_states_no_path_reaches_are_all_drawn_inside() -> None:
    diagram = layout(_chain_with_exits(6))
    nodes = {node.name: node for node in diagram.nodes}

    assert nodes["s0"].x < nodes["s6"].x < nodes["end"].x < nodes["u1"].x == nodes["u2"].x
    for edge in diagram.edges:
        if edge.source.startswith("u"):
            # Bends out to the right of their column: a cubic from the box's side, whose
            # farthest point is three quarters of the way to its control points.
            start, control = edge.path[1:].split(" C")
            x1 = float(start.split(",")[0])
            bulge = float(control.split(",")[0])
            assert x1 < x1 + 0.75 * (bulge - x1) <= diagram.width
            continue
        for x, y in _points(edge.path):
            assert 0 <= x <= diagram.width
            assert 0 <= y <= diagram.height
        assert 0 <= edge.label_y <= diagram.height
    assert all(node.y + node.height <= diagram.height for node in diagram.nodes)
