"""LLM drivers for Planners: the runtime's drivers behind the small ``complete`` interface.

There is one OpenAI-compatible driver in disco, :class:`disco.runtime.OpenAIChatDriver`
(on the official ``openai`` SDK), and one scripted driver,
:class:`disco.runtime.ScriptedDriver`; both implement :class:`LLMDriver`.
``OpenAICompatibleDriver`` is the earlier name of the former.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypedDict

from disco.runtime._drivers import Completion, LLMError
from disco.runtime._openai import OpenAIChatDriver
from disco.runtime._scripted import ScriptedDriver

__all__ = [
    "ChatMessage",
    "Completion",
    "LLMDriver",
    "LLMError",
    "OpenAIChatDriver",
    "OpenAICompatibleDriver",
    "ScriptedDriver",
]


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


OpenAICompatibleDriver = OpenAIChatDriver
"""The earlier name of :class:`disco.runtime.OpenAIChatDriver` (the same class)."""
