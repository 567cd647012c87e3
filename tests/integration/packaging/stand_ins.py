"""Stand-ins for the agents a scaffolded worker or planner asks, on the real bus.

    python -m tests.integration.packaging.stand_ins worker my-worker
    python -m tests.integration.packaging.stand_ins planner my-planner

A worker made by ``disco new worker NAME`` delegates ``NAME.lookup.requested``; a
planner's states ask for ``NAME.search.requested`` and ``NAME.summarize.requested``.
One Tool answers them, so the scaffolded agent can answer its own request.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from disco import Tool

FOUND = ["a broker", "a log"]
SUMMARY = "two results"


class Query(BaseModel):
    query: str


class Items(BaseModel):
    items: list[str]


def stand_in(kind: str, name: str) -> Tool:
    """The Tool answering what a scaffolded ``kind`` agent called ``name`` asks."""
    tool = Tool(f"{name}-stand-in", description="Answers what a scaffolded agent asks.")
    if kind == "worker":

        @tool.on_invoke(f"{name}.lookup.requested")
        async def lookup(request: Query) -> list[str]:
            """Looks a topic up."""
            return FOUND

    elif kind == "planner":

        @tool.on_invoke(f"{name}.search.requested")
        async def search(request: Query) -> list[str]:
            """Searches a topic."""
            return FOUND

        @tool.on_invoke(f"{name}.summarize.requested")
        async def summarize(request: Items) -> str:
            """Summarizes what was found."""
            return SUMMARY if request.items == FOUND else f"unexpected: {request.items}"

    else:
        raise SystemExit(f"no stand-in for a {kind}")
    return tool


if __name__ == "__main__":
    stand_in(sys.argv[1], sys.argv[2]).serve()
