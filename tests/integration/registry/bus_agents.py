"""A small bus for the AsyncAPI tests, made with the SDK as an agent team would write it:
a Tool (request/reply, two versions), a Worker that fans out to it, a Planner that
announces a business fact with a registered schema version and emits plan events
on ``system-events``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from disco import (
    PlanDefinition,
    Planner,
    ResultContext,
    StateAction,
    StateConfig,
    StateTransition,
    TaskContext,
    Tool,
    Worker,
)
from disco_common.registry import AgentRegistration, EventDefinition, EventDirection, SchemaRef

__all__ = [
    "ORDER_SHIPPED_V1",
    "ORDER_SHIPPED_V2",
    "carriers",
    "planner",
    "shipping_worker",
    "ttl",
]

ORDER_SHIPPED_V1: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "carrier": {"type": "string"}},
    "required": ["order_id"],
    "examples": [{"order_id": "o-1", "carrier": "swift"}],
}
ORDER_SHIPPED_V2: dict[str, Any] = {
    **ORDER_SHIPPED_V1,
    "properties": {**ORDER_SHIPPED_V1["properties"], "weight_kg": {"type": "number"}},
}


class Address(BaseModel):
    city: str
    country: str = "PT"


class QuoteRequest(BaseModel):
    """A parcel to price."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"carrier": "swift", "kg": 2.5, "to": {"city": "Lisbon"}},
                {"carrier": "nobody"},  # lacks kg: no example of the document
            ]
        }
    )

    carrier: str = Field(description="Who carries it.")
    kg: float = Field(gt=0, description="Its weight.")
    to: Address | None = None


class Quote(BaseModel):
    carrier: str
    price: float


class Parcel(BaseModel):
    kg: float


def carriers(name: str, *, version: str = "1.0.0", answer_event: str | None = None) -> Tool:
    """The Tool: ``quote.requested`` answered with a :class:`Quote`."""
    tool = Tool(name, version=version, description="Prices parcels.")

    @tool.on_invoke("quote.requested", response_event=answer_event)
    async def quote(request: QuoteRequest) -> Quote:
        """One carrier's price."""
        return Quote(carrier=request.carrier, price=request.kg * 2)

    return tool


def shipping_worker(name: str) -> Worker:
    """The Worker: takes ``shipping.requested``, asks the carriers (fan-out), and says so."""
    worker = Worker(
        name,
        version="2.1.0",
        description="Finds the cheapest carrier.",
        events=[
            EventDefinition(
                event_type="quote.requested",
                topic="action-requests",
                direction=EventDirection.PRODUCED,
            ),
            EventDefinition(
                event_type="quote.answered",
                topic="action-results",
                direction=EventDirection.CONSUMED,
            ),
            EventDefinition(
                event_type="task.progress",
                topic="system-events",
                direction=EventDirection.PRODUCED,
            ),
        ],
    )

    @worker.on_task("shipping.requested")
    async def ask_everyone(task: TaskContext[Parcel]) -> None:
        """Asks every carrier at once."""

    @worker.on_result("quote.answered")
    async def collect(result: ResultContext) -> None:
        """Fan-in."""

    return worker


def planner(name: str, *, schema_version: str = "1.0.0") -> Planner:
    """The Planner: ``trip.requested`` as a plan; announces ``order.shipped`` (a registered
    schema version) and emits ``plan.*`` on ``system-events``."""
    agent = Planner(
        name,
        description="Plans deliveries.",
        events=[
            EventDefinition(
                event_type="order.shipped",
                topic="business-facts",
                description="An order left the warehouse.",
                schema_ref=SchemaRef(name="order.shipped", version=schema_version),
            ),
            EventDefinition(
                event_type="plan.started",
                topic="system-events",
                direction=EventDirection.PRODUCED,
            ),
            EventDefinition(
                event_type="plan.state_changed",
                topic="system-events",
                direction=EventDirection.PRODUCED,
            ),
        ],
    )
    agent.add_plan(
        "trip.requested",
        PlanDefinition(
            plan_type="delivery",
            states=[
                StateConfig(state_name="start", default_next="shipping"),
                StateConfig(
                    state_name="shipping",
                    action=StateAction(
                        event_type="shipping.requested", response_event="trip.shipped"
                    ),
                    transitions=[StateTransition(on_event="trip.shipped", to_state="done")],
                ),
                StateConfig(state_name="done", is_terminal=True),
            ],
        ),
    )
    return agent


def ttl(registration: AgentRegistration, seconds: int = 600) -> AgentRegistration:
    """``registration`` living ``seconds`` without heartbeats (these agents never run)."""
    return registration.model_copy(update={"ttl_seconds": seconds})
