"""Models and agents shared by the agent-layer unit tests (module level, so type hints resolve)."""

from __future__ import annotations

from pydantic import BaseModel

from disco.agents import Tool


class Addition(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    total: int


class Text(BaseModel):
    text: str


def adder() -> Tool:
    """A tool answering ``add.requested`` with the total."""
    tool = Tool("adder", register=False)

    @tool.on_invoke("add.requested")
    async def add(request: Addition) -> Total:
        return Total(total=request.a + request.b)

    return tool
