"""LLM drivers for Planners: the runtime's drivers behind the small ``complete`` interface.

There is one OpenAI-compatible driver in disco, :class:`disco.runtime.OpenAIChatDriver`
(on the official ``openai`` SDK), and one scripted driver,
:class:`disco.runtime.ScriptedDriver`; both implement :class:`LLMDriver`.
``OpenAICompatibleDriver`` is the earlier name of the former.
"""

from __future__ import annotations

from disco._completion import ChatMessage, Completion, LLMDriver, LLMError
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


OpenAICompatibleDriver = OpenAIChatDriver
"""The earlier name of :class:`disco.runtime.OpenAIChatDriver` (the same class)."""
