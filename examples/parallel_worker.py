"""Layer 3, a Worker with parallel fan-out/fan-in: ask three carriers for a quote at once.

    uv run python examples/parallel_worker.py         # the worker and the carriers tool
    uv run disco ask shipping.quote.requested '{"kg": 3.5}'

The answers come back in any order (each carrier takes its time); the task
completes exactly once, when the last one arrives, even with several worker
instances handling answers concurrently.
"""

from __future__ import annotations

import asyncio
import random

from pydantic import BaseModel

from disco import Agent, DelegationSpec, ResultContext, TaskContext, Tool, Worker, serve

carriers = Tool("carriers", description="Shipping quotes from three carriers.")
_RATES = {"swift": 4.0, "steady": 2.5, "slow-boat": 1.0}


class QuoteRequest(BaseModel):
    carrier: str
    kg: float


class Quote(BaseModel):
    carrier: str
    price: float


@carriers.on_invoke("carrier.quote.requested")
async def quote(request: QuoteRequest) -> Quote:
    """One carrier's price for a parcel."""
    await asyncio.sleep(random.uniform(0.05, 0.5))  # carriers answer in their own time
    return Quote(carrier=request.carrier, price=round(_RATES[request.carrier] * request.kg, 2))


class Parcel(BaseModel):
    kg: float


worker = Worker("shipping-broker", description="Finds the cheapest carrier for a parcel.")


@worker.on_task("shipping.quote.requested")
async def ask_everyone(task: TaskContext[Parcel]) -> None:
    """Asks every carrier at once (fan-out)."""
    await task.delegate_parallel(
        [
            DelegationSpec(
                event_type="carrier.quote.requested",
                data={"carrier": carrier, "kg": task.input.kg},
                response_event="carrier.quoted",
            )
            for carrier in _RATES
        ]
    )


@worker.on_result("carrier.quoted")
async def collect(result: ResultContext) -> None:
    """Fan-in: complete when every carrier answered."""
    task = await result.restore_task()
    quotes = task.aggregate_parallel_results(task.parallel_groups[0])
    if quotes is None:
        return  # still waiting; the recorded answer is saved when this returns
    offers = [q for q in quotes.values() if q is not None]
    best = min(offers, key=lambda offer: Quote.model_validate(offer).price)
    await task.complete({"best": best, "offers": offers})


AGENTS: list[Agent] = [worker, carriers]


if __name__ == "__main__":
    serve(*AGENTS)  # until Ctrl-C (or SIGTERM), which stops them all cleanly
