"""Models shared by the agent-layer unit tests (module level, so type hints resolve)."""

from __future__ import annotations

from pydantic import BaseModel


class Addition(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    total: int


class Text(BaseModel):
    text: str
