"""Layer 3, a Worker with sequential delegation: price each item in turn, then add tax.

    uv run python examples/sequential_worker.py       # the worker and its two tools
    uv run disco ask order.price.requested \
        '{"items": [{"sku": "book", "qty": 2}, {"sku": "pen", "qty": 10}]}'

The task is saved in the memory service before each request goes out, so any
instance of the worker can pick up the next answer (kill it mid-way and start
it again: the order still completes).
"""

from __future__ import annotations

from pydantic import BaseModel

from disco import Agent, ResultContext, TaskContext, Tool, Worker, serve

# -- two small tools the worker delegates to ----------------------------------------

prices = Tool("price-list", description="Unit prices by SKU.")
_PRICES = {"book": 12.5, "pen": 1.2, "lamp": 40.0}


class PriceQuery(BaseModel):
    sku: str
    qty: int


class PricedLine(BaseModel):
    sku: str
    amount: float


@prices.on_invoke("price.requested")
async def price(request: PriceQuery) -> PricedLine:
    """The price of ``qty`` units of ``sku``."""
    if request.sku not in _PRICES:
        raise KeyError(f"no price for {request.sku!r}; known: {sorted(_PRICES)}")
    return PricedLine(sku=request.sku, amount=round(_PRICES[request.sku] * request.qty, 2))


taxes = Tool("tax-office", description="VAT on an amount.")


class NetAmount(BaseModel):
    net: float


@taxes.on_invoke("tax.requested")
async def tax(request: NetAmount) -> dict[str, float]:
    """20% VAT."""
    net = request.net
    return {"net": net, "vat": round(net * 0.2, 2), "gross": round(net * 1.2, 2)}


# -- the worker ----------------------------------------------------------------------


class Order(BaseModel):
    items: list[PriceQuery]


worker = Worker("order-pricer", description="Prices an order item by item, then adds VAT.")


@worker.on_task("order.price.requested")
async def start(task: TaskContext[Order]) -> None:
    """Prices an order (items one at a time), then adds VAT."""
    task.state["lines"] = []
    first = task.input.items[0]
    await task.delegate("price.requested", first.model_dump(), response_event="order.line.priced")


@worker.on_result("order.line.priced")
async def next_line(result: ResultContext) -> None:
    task = await result.restore_task()
    if not result.success:
        await task.fail(result.error or "pricing failed")
        return
    lines = task.state["lines"]
    assert isinstance(lines, list)
    lines.append(result.result)
    items = task.input.items
    if len(lines) < len(items):
        await task.delegate(
            "price.requested", items[len(lines)].model_dump(), response_event="order.line.priced"
        )
    else:
        net = sum(PricedLine.model_validate(line).amount for line in lines)
        await task.delegate("tax.requested", {"net": net}, response_event="order.taxed")


@worker.on_result("order.taxed")
async def finish(result: ResultContext) -> None:
    task = await result.restore_task()
    await task.complete({"lines": task.state["lines"], "total": result.result})


AGENTS: list[Agent] = [worker, prices, taxes]


if __name__ == "__main__":
    serve(*AGENTS)  # until Ctrl-C (or SIGTERM), which stops them all cleanly
