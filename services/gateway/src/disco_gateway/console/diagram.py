"""A plan's state machine laid out for an SVG drawing (the template draws it).

Layers by distance from the initial state (breadth first), one column per
layer, states in a column in the order they were reached. Forward edges are
straight; edges back to an earlier or the same column arc above the boxes.
Small state machines (a plan allows at most a few dozen states) read well this
way, and the page needs no graph library and no JavaScript to show one: a
Graphviz binary is not something the gateway's image should need.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from disco_common.plans import PlanDefinition

__all__ = ["Diagram", "DiagramEdge", "DiagramNode", "layout"]

BOX_WIDTH = 150
BOX_HEIGHT = 40
COLUMN_GAP = 90
ROW_GAP = 34
MARGIN = 40


@dataclass(frozen=True)
class DiagramNode:
    """One state's box."""

    name: str
    x: int
    y: int
    width: int
    height: int
    initial: bool
    terminal: bool
    failure: bool
    current: bool
    visited: bool

    @property
    def css_class(self) -> str:
        classes = ["state"]
        for flag, name in (
            (self.initial, "initial"),
            (self.terminal, "terminal"),
            (self.failure, "failure"),
            (self.visited, "visited"),
            (self.current, "current"),
        ):
            if flag:
                classes.append(name)
        return " ".join(classes)


@dataclass(frozen=True)
class DiagramEdge:
    """One transition's arrow, with its trigger as the label."""

    source: str
    target: str
    path: str
    label: str
    label_x: int
    label_y: int
    taken: bool


@dataclass(frozen=True)
class Diagram:
    """Boxes and arrows in a ``width`` x ``height`` drawing."""

    width: int
    height: int
    nodes: list[DiagramNode]
    edges: list[DiagramEdge]


def _layers(definition: PlanDefinition) -> list[list[str]]:
    depth = {definition.initial_state: 0}
    queue = deque([definition.initial_state])
    while queue:
        name = queue.popleft()
        for target in definition.states[name].targets:
            if target not in depth:
                depth[target] = depth[name] + 1
                queue.append(target)
    # States no path reaches (a definition allows them) go in a last column.
    last = max(depth.values()) + 1
    for name in definition.states:
        depth.setdefault(name, last)
    layers: list[list[str]] = [[] for _ in range(max(depth.values()) + 1)]
    for name, level in depth.items():
        layers[level].append(name)
    return [layer for layer in layers if layer]


def layout(
    definition: PlanDefinition,
    *,
    current_state: str | None = None,
    visited: Iterable[str] = (),
    taken: Iterable[tuple[str, str]] = (),
) -> Diagram:
    """The drawing of ``definition``, marking where the plan is and where it has been.

    Args:
        definition: the plan type's state machine.
        current_state: the state the plan is in now (drawn highlighted).
        visited: states the plan passed through.
        taken: ``(from, to)`` transitions the plan made.
    """
    layers = _layers(definition)
    seen = set(visited)
    moves = set(taken)
    tallest = max(len(layer) for layer in layers)
    height = MARGIN * 2 + tallest * BOX_HEIGHT + (tallest - 1) * ROW_GAP + 40
    width = MARGIN * 2 + len(layers) * BOX_WIDTH + (len(layers) - 1) * COLUMN_GAP
    nodes: dict[str, DiagramNode] = {}
    column_of: dict[str, int] = {}
    for column, layer in enumerate(layers):
        # Centre each column vertically; the top 40 px leave room for back arcs.
        column_height = len(layer) * BOX_HEIGHT + (len(layer) - 1) * ROW_GAP
        top = 40 + MARGIN + (height - 40 - 2 * MARGIN - column_height) // 2
        for row, name in enumerate(layer):
            state = definition.states[name]
            column_of[name] = column
            nodes[name] = DiagramNode(
                name=name,
                x=MARGIN + column * (BOX_WIDTH + COLUMN_GAP),
                y=top + row * (BOX_HEIGHT + ROW_GAP),
                width=BOX_WIDTH,
                height=BOX_HEIGHT,
                initial=name == definition.initial_state,
                terminal=state.is_terminal,
                failure=state.is_failure,
                current=name == current_state,
                visited=name in seen,
            )
    edges: list[DiagramEdge] = []
    for name, state in definition.states.items():
        labelled = [(t.to_state, t.on_event) for t in state.transitions]
        if state.default_next is not None:
            labelled.append((state.default_next, "(default)"))
        for target, label in labelled:
            edges.append(_edge(nodes[name], nodes[target], label, (name, target) in moves))
    return Diagram(width=width, height=height, nodes=list(nodes.values()), edges=edges)


def _edge(source: DiagramNode, target: DiagramNode, label: str, taken: bool) -> DiagramEdge:
    if target.x > source.x:
        x1, y1 = source.x + source.width, source.y + source.height // 2
        x2, y2 = target.x, target.y + target.height // 2
        path = f"M{x1},{y1} L{x2},{y2}"
        label_x, label_y = (x1 + x2) // 2, (y1 + y2) // 2 - 6
    else:
        # Back (or same-column) edge: an arc over the boxes, top to top.
        x1, y1 = source.x + source.width // 2, source.y
        x2, y2 = target.x + target.width // 2 + (12 if target is source else 0), target.y
        lift = 30 + abs(x1 - x2) // 8
        top = min(y1, y2) - lift
        path = f"M{x1},{y1} C{x1},{top} {x2},{top} {x2},{y2}"
        label_x, label_y = (x1 + x2) // 2, top + 6
    return DiagramEdge(
        source=source.name,
        target=target.name,
        path=path,
        label=label,
        label_x=label_x,
        label_y=label_y,
        taken=taken,
    )
