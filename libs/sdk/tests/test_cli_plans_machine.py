"""``disco plans show``'s state machine: each move with its event and, when it has one, the
condition that picks it among the moves on that event."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from disco._cli.plans import _machine
from disco_common.plans import PlanDefinition, PlanStatus, StateConfig, StateTransition
from disco_common.tracker import PlanProgress, PlanTypeRecord, PlanView

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TRIP = PlanDefinition(
    plan_type="trip",
    initial_state="searching",
    states=[
        StateConfig(
            state_name="searching",
            transitions=[
                StateTransition(on_event="found", to_state="failed", condition="!success"),
                StateTransition(on_event="found", to_state="done"),
            ],
        ),
        StateConfig(state_name="done", is_terminal=True),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)


def test_a_conditional_move_shows_its_condition_beside_its_event() -> None:
    view = PlanView(
        plan=PlanProgress(
            plan_id="p-1", status=PlanStatus.RUNNING, current_state="searching", updated_at=NOW
        ),
        definition=PlanTypeRecord(
            plan_type="trip", version="1.0.0", definition=TRIP, content_hash="h", created_at=NOW
        ),
    )
    console = Console(width=200, record=True)

    panel = _machine(view)
    assert panel is not None
    console.print(panel)
    text = console.export_text()

    assert "found [!success] → failed; found → done" in text
    assert "failed   (end, failed)" in text
