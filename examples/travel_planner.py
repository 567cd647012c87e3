"""Layer 4, a Planner: a trip as a state machine with a failure branch, a conditional
transition and a pause for a human answered from the command line.

    uv run python examples/travel_planner.py          # the planner and its tools
    uv run disco ask trip.requested '{"city": "Lisbon"}'      # flights found
    uv run disco ask trip.requested '{"city": "Mordor"}'      # failure branch
    uv run disco ask trip.requested '{"city": "Atlantis"}' --wait 600
    uv run disco answer yes              # in another terminal: the HITL answer

    searching ──!success──────────────────────────────▶ failed
        │ result.count > 0                                ▲
        ├─────────────────▶ booking ──▶ done              │
        │                      ▲                           │
        └─ otherwise ─▶ asking_human ─ result == 'yes' ─┘ (else: failed)

Conditions are CEL expressions (`disco.conditions`); `{goal_data.city}` and
`{results.searching.flights.0}` are filled in from the plan.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from disco import (
    Agent,
    PlanDefinition,
    Planner,
    StateAction,
    StateConfig,
    StateTransition,
    Tool,
    serve,
)

# -- the tools the plan uses -----------------------------------------------------------

travel = Tool("travel-desk", description="Flight search and booking.")


class FlightSearch(BaseModel):
    city: str


@travel.on_invoke("flights.search.requested")
async def search_flights(request: FlightSearch) -> dict[str, Any]:
    """Flights to a city (none to Atlantis; Mordor's airport is closed)."""
    if request.city == "Mordor":
        raise RuntimeError("one does not simply fly into Mordor")
    flights = [] if request.city == "Atlantis" else [f"DSC-{len(request.city)}01"]
    return {"city": request.city, "count": len(flights), "flights": flights}


class Booking(BaseModel):
    city: str
    flight: str | None = None


@travel.on_invoke("trip.book.requested")
async def book(request: Booking) -> dict[str, Any]:
    """Books a trip (a flight, or a boat when there was none)."""
    return {"booked": request.flight or "boat", "to": request.city, "reference": "BK-42"}


# -- the plan --------------------------------------------------------------------------

TRIP = PlanDefinition(
    plan_type="trip",
    description="Find a way to a city and book it; ask a human when there is no flight.",
    states=[
        StateConfig(state_name="start", default_next="searching"),
        StateConfig(
            state_name="searching",
            description="Look for flights.",
            action=StateAction(
                event_type="flights.search.requested",
                response_event="trip.flights.found",
                data={"city": "{goal_data.city}"},
            ),
            transitions=[
                StateTransition(
                    on_event="trip.flights.found", to_state="failed", condition="!success"
                ),
                StateTransition(
                    on_event="trip.flights.found", to_state="booking", condition="result.count > 0"
                ),
                StateTransition(on_event="trip.flights.found", to_state="asking_human"),
            ],
        ),
        StateConfig(
            state_name="asking_human",
            description="No flight: ask whether a boat will do (the plan pauses).",
            action=StateAction(
                event_type="notification.human_input",
                topic="notification-events",
                response_event="trip.boat.decided",
                data={
                    "question": "No flights to {goal_data.city}. Go by boat instead? (yes/no)",
                    "options": [{"value": "yes", "label": "yes"}, {"value": "no", "label": "no"}],
                },
            ),
            transitions=[
                StateTransition(
                    on_event="trip.boat.decided",
                    to_state="booking_boat",
                    condition="result == 'yes'",
                ),
                StateTransition(on_event="trip.boat.decided", to_state="failed"),
            ],
        ),
        StateConfig(
            state_name="booking",
            action=StateAction(
                event_type="trip.book.requested",
                response_event="trip.booked",
                data={"city": "{goal_data.city}", "flight": "{results.searching.flights.0}"},
            ),
            transitions=[StateTransition(on_event="trip.booked", to_state="done")],
        ),
        StateConfig(
            state_name="booking_boat",
            action=StateAction(
                event_type="trip.book.requested",
                response_event="trip.booked",
                data={"city": "{goal_data.city}"},
            ),
            transitions=[StateTransition(on_event="trip.booked", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True, description="Booked."),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)

planner = Planner("trip-planner", description="Plans and books trips.")
planner.add_plan("trip.requested", TRIP)

AGENTS: list[Agent] = [planner, travel]


if __name__ == "__main__":
    serve(*AGENTS)  # until Ctrl-C (or SIGTERM), which stops them all cleanly
