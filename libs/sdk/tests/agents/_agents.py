"""Models and agents shared by the agent-layer unit tests (module level, so type hints resolve)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

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


def ids_asked(target: object, method: str) -> list[str]:
    """The id each call of ``target.<method>`` (an async method taking an id first) asks
    for, from now on: which contexts a memory was asked to read back, say."""
    asked: list[str] = []
    call: Callable[..., Awaitable[Any]] = getattr(target, method)

    async def counted(id_: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(id_)
        return await call(id_, *args, **kwargs)

    setattr(target, method, counted)
    return asked
