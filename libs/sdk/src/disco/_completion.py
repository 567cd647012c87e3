"""The completion interface a Planner reasons with, below the agents and the runtime.

:class:`LLMDriver` is what a :class:`~disco.agents.Planner` asks of a model
(``await driver.complete(messages, ...)`` -> :class:`Completion`); the runtime's
drivers (:class:`disco.runtime.OpenAIChatDriver`, :class:`disco.runtime.ScriptedDriver`)
implement it, and :mod:`disco.llm` exports it. It lives here so that the agents
need not import the runtime that builds on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict

__all__ = ["ChatMessage", "Completion", "LLMDriver", "LLMError"]


class LLMError(RuntimeError):
    """The model could not be reached or answered with an error."""


@dataclass(frozen=True, slots=True)
class Completion:
    """What the model answered (the simple form of :meth:`disco.runtime.ChatDriver.complete`)."""

    content: str
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatMessage(TypedDict):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


class LLMDriver(Protocol):
    """Completes a chat."""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> Completion:
        """The model's answer to ``messages`` (``json_mode``: ask for one JSON object)."""
        ...
