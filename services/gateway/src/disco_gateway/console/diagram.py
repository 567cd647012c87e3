"""A plan's state machine laid out for an SVG drawing (the template draws it).

One column per layer, left to right: a state's layer is the longest path to it
from the initial state once the loops are set aside (each edge back to a state
on the way there, found depth first), so every other move points right, also
between states a plain distance would put in one column (``booking -> failed``
after ``searching -> failed``). In a column, states sit near the states they
come from (the mean row of their predecessors, then the order they were
reached). Forward edges are straight; loops back to an earlier column (or the
same state) arc above the boxes; moves between states of one column (states no
path reaches) bend out to the right of it.
Small state machines (a plan allows at most a few dozen states) read well this
way, and the page needs no graph library and no JavaScript to show one: a
Graphviz binary is not something the gateway's image should need.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from disco_common.plans import PlanDefinition

__all__ = ["Diagram", "DiagramEdge", "DiagramNode", "layout"]

BOX_WIDTH = 150
BOX_HEIGHT = 40
COLUMN_GAP = 90
ROW_GAP = 34
MARGIN = 40
_CONDITION_CHARS = 24


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
    condition: str | None = None
    """When the move is taken on its event (drawn under the label, shortened)."""

    @property
    def short_condition(self) -> str | None:
        if self.condition is None or len(self.condition) <= _CONDITION_CHARS:
            return self.condition
        return self.condition[: _CONDITION_CHARS - 1] + "…"


@dataclass(frozen=True)
class Diagram:
    """Boxes and arrows in a ``width`` x ``height`` drawing."""

    width: int
    height: int
    nodes: list[DiagramNode]
    edges: list[DiagramEdge]


Slot = str | tuple[str, str, int]
"""A place in a column: a state, or where a move across several columns passes
through this one (``(from, to, column)``)."""


def _depths(definition: PlanDefinition) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Each state's column, and the moves that loop back (left out of the layering)."""
    states = definition.states
    initial = definition.initial_state
    # Depth first from the initial state: a move to a state on the current path is a
    # loop; the others form a DAG, whose reverse postorder is a topological order.
    loops: set[tuple[str, str]] = set()
    on_path = {initial}
    finished: list[str] = []  # in postorder
    done: set[str] = set()
    stack: list[tuple[str, Iterator[str]]] = [(initial, iter(states[initial].targets))]
    while stack:
        name, targets = stack[-1]
        target = next(targets, None)
        if target is None:
            stack.pop()
            on_path.discard(name)
            finished.append(name)
            done.add(name)
        elif target in on_path:
            loops.add((name, target))
        elif target not in done:
            on_path.add(target)
            stack.append((target, iter(states[target].targets)))
    depth = {initial: 0}
    for name in reversed(finished):
        for target in states[name].targets:
            if (name, target) not in loops:
                depth[target] = max(depth.get(target, 0), depth[name] + 1)
    # States no path reaches (a definition allows them) go in a last column.
    last = max(depth.values()) + 1
    for name in states:
        depth.setdefault(name, last)
    return depth, loops


def _moves(definition: PlanDefinition) -> list[tuple[str, str, str, str | None]]:
    """Every move as ``(from, to, label, condition)``: transitions by their event, then
    the default."""
    moves: list[tuple[str, str, str, str | None]] = []
    for name, state in definition.states.items():
        moves.extend((name, t.to_state, t.on_event, t.condition) for t in state.transitions)
        if state.default_next is not None:
            moves.append((name, state.default_next, "(default)", None))
    return moves


def _layers(definition: PlanDefinition) -> list[list[Slot]]:
    depth, loops = _depths(definition)
    reached = {name: index for index, name in enumerate(_breadth_first(definition))}
    layers: list[list[Slot]] = [[] for _ in range(max(depth.values()) + 1)]
    # What each slot comes from, in the column before it (for the ordering below).
    before: dict[Slot, list[Slot]] = {}
    for name in sorted(depth, key=lambda n: reached.get(n, len(reached))):
        layers[depth[name]].append(name)
    for source, target, *_ in _moves(definition):
        if (source, target) in loops or depth[target] <= depth[source]:
            continue
        previous: Slot = source
        for column in range(depth[source] + 1, depth[target]):
            passing: Slot = (source, target, column)
            if passing not in before:
                layers[column].append(passing)
            before.setdefault(passing, []).append(previous)
            previous = passing
        before.setdefault(target, []).append(previous)
    # Each slot near what it comes from: the mean of their (centred) rows, then the
    # order the states were reached.
    row: dict[Slot, float] = {}
    for layer in layers:

        def place(slot: Slot) -> tuple[float, int]:
            rows = [row[s] for s in before.get(slot, ()) if s in row]
            name = slot if isinstance(slot, str) else slot[1]
            return (sum(rows) / len(rows) if rows else 0.0, reached.get(name, len(reached)))

        layer.sort(key=place)
        for index, slot in enumerate(layer):
            row[slot] = index - (len(layer) - 1) / 2
    return [layer for layer in layers if layer]


def _breadth_first(definition: PlanDefinition) -> list[str]:
    """The states in the order a breadth-first walk from the initial state reaches them."""
    seen = [definition.initial_state]
    queue = deque(seen)
    while queue:
        for target in definition.states[queue.popleft()].targets:
            if target not in seen:
                seen.append(target)
                queue.append(target)
    return seen


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
    lanes: dict[tuple[str, str, int], tuple[int, int, int]] = {}  # left x, right x, mid y
    for column, layer in enumerate(layers):
        # Centre each column vertically; the top 40 px leave room for back arcs.
        column_height = len(layer) * BOX_HEIGHT + (len(layer) - 1) * ROW_GAP
        top = 40 + MARGIN + (height - 40 - 2 * MARGIN - column_height) // 2
        x = MARGIN + column * (BOX_WIDTH + COLUMN_GAP)
        for row, slot in enumerate(layer):
            y = top + row * (BOX_HEIGHT + ROW_GAP)
            if not isinstance(slot, str):
                lanes[slot] = (x, x + BOX_WIDTH, y + BOX_HEIGHT // 2)
                continue
            state = definition.states[slot]
            nodes[slot] = DiagramNode(
                name=slot,
                x=x,
                y=y,
                width=BOX_WIDTH,
                height=BOX_HEIGHT,
                initial=slot == definition.initial_state,
                terminal=state.is_terminal,
                failure=state.is_failure,
                current=slot == current_state,
                visited=slot in seen,
            )
    edges: list[DiagramEdge] = []
    for source, target, label, condition in _moves(definition):
        through = sorted(
            (column, lane) for (s, t, column), lane in lanes.items() if (s, t) == (source, target)
        )
        edges.append(
            _edge(
                nodes[source],
                nodes[target],
                label,
                (source, target) in moves,
                [lane for _, lane in through],
                condition,
            )
        )
    return Diagram(
        width=width,
        height=height,
        nodes=list(nodes.values()),
        edges=_spread_labels(edges, list(nodes.values())),
    )


_Box = tuple[float, float, float, float]  # left, top, right, bottom
_CHAR_WIDTH = 6.0  # of an edge label, about (10.5 px text)
_ALONG = (0.5, 0.3, 0.7, 0.15, 0.85)
"""Where on its last stretch a forward edge's label may go, in order of preference."""


def _points(path: str) -> list[tuple[float, float]] | None:
    """The corners of a path of straight stretches (``M.. L..``), else None."""
    if "C" in path:
        return None
    return [(float(x), float(y)) for x, y in (pair.split(",") for pair in path[1:].split(" L"))]


def _overlaps(a: _Box, b: _Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _label_box(edge: DiagramEdge, x: float, y: float) -> _Box:
    chars = max(len(edge.label), len(edge.short_condition or "") + 2)
    half = chars * _CHAR_WIDTH / 2
    return (x - half, y - 10, x + half, y + (13 if edge.condition else 2))


def _spread_labels(edges: list[DiagramEdge], nodes: list[DiagramNode]) -> list[DiagramEdge]:
    """Forward edges' labels moved along their last stretch, where one would cover a box,
    a label placed before, or another edge's level stretch (a lane or a straight move)."""
    boxes: list[_Box] = [(n.x, n.y, n.x + n.width, n.y + n.height) for n in nodes]
    level: list[tuple[int, _Box]] = []
    corners = {index: _points(edge.path) for index, edge in enumerate(edges)}
    for index, points in corners.items():
        for (ax, ay), (bx, by) in zip(points or (), (points or ())[1:], strict=False):
            if ay == by:
                level.append((index, (min(ax, bx), ay - 2, max(ax, bx), ay + 2)))
    placed: list[_Box] = []
    spread: list[DiagramEdge] = []
    for index, edge in enumerate(edges):
        points = corners[index]
        if points is None:
            spread.append(edge)
            continue
        (ax, ay), (bx, by) = points[-2], points[-1]
        lift = 6 + (10 if edge.condition else 0)
        candidates = [(ax + (bx - ax) * t, ay + (by - ay) * t - lift) for t in _ALONG]
        others = [*boxes, *placed, *(box for owner, box in level if owner != index)]
        x, y = next(
            (
                (x, y)
                for x, y in candidates
                if not any(_overlaps(_label_box(edge, x, y), box) for box in others)
            ),
            candidates[0],
        )
        placed.append(_label_box(edge, x, y))
        spread.append(replace(edge, label_x=round(x), label_y=round(y)))
    return spread


def _edge(
    source: DiagramNode,
    target: DiagramNode,
    label: str,
    taken: bool,
    lanes: list[tuple[int, int, int]],
    condition: str | None = None,
) -> DiagramEdge:
    if target.x > source.x:
        # Straight to the next column, or through a lane of each column in between.
        x1, y1 = source.x + source.width, source.y + source.height // 2
        x2, y2 = target.x, target.y + target.height // 2
        points = [(x1, y1)]
        for left, right, middle in lanes:
            points += [(left, middle), (right, middle)]
        points.append((x2, y2))
        path = "M" + " L".join(f"{x},{y}" for x, y in points)
        # The label on the last stretch, into the target: the first, out of the source,
        # may share its gap with a move from a state below or above.
        (ax, ay), (bx, by) = points[-2], points[-1]
        label_x, label_y = (ax + bx) // 2, (ay + by) // 2 - 6
    elif target.x == source.x and target is not source:
        # Within one column: out of the right side and back into it, clear of the boxes.
        x1, y1 = source.x + source.width, source.y + source.height // 2
        x2, y2 = target.x + target.width, target.y + target.height // 2
        bulge = x1 + COLUMN_GAP // 2
        path = f"M{x1},{y1} C{bulge},{y1} {bulge},{y2} {x2},{y2}"
        label_x, label_y = x1 + COLUMN_GAP // 3, (y1 + y2) // 2
    else:
        # Back (or same-column) edge: an arc over the boxes, top to top.
        x1, y1 = source.x + source.width // 2, source.y
        x2, y2 = target.x + target.width // 2 + (12 if target is source else 0), target.y
        lift = 30 + abs(x1 - x2) // 8
        top = min(y1, y2) - lift
        path = f"M{x1},{y1} C{x1},{top} {x2},{top} {x2},{y2}"
        label_x, label_y = (x1 + x2) // 2, top + 6
    if condition is not None:
        label_y -= 10  # the condition goes on a second line, above the arrow too
    return DiagramEdge(
        source=source.name,
        target=target.name,
        path=path,
        label=label,
        label_x=label_x,
        label_y=label_y,
        taken=taken,
        condition=condition,
    )
