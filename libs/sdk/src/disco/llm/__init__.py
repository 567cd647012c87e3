"""LLM reasoning for Planners, behind one small interface.

- :class:`LLMDriver`: ``await driver.complete(messages, ...)`` → :class:`Completion`.
- :class:`OpenAICompatibleDriver`: any ``/v1/chat/completions`` server (OpenAI,
  vLLM, llama.cpp, Ollama, LiteLLM...), through the official ``openai`` SDK; the
  same class as :class:`disco.runtime.OpenAIChatDriver`.
- :class:`ScriptedDriver`: answers from a script, for tests and demos; it
  records what it was asked (the same class as :class:`disco.runtime.ScriptedDriver`).

:func:`plan_from_llm` and :func:`next_step_from_llm` are what
``Planner.create_plan`` and ``Planner.reason_next_action`` use.
"""

from disco._reasoning import NextStep, next_step_from_llm, plan_from_llm
from disco.llm._drivers import (
    ChatMessage,
    Completion,
    LLMDriver,
    LLMError,
    OpenAICompatibleDriver,
    ScriptedDriver,
)

__all__ = [
    "ChatMessage",
    "Completion",
    "LLMDriver",
    "LLMError",
    "NextStep",
    "OpenAICompatibleDriver",
    "ScriptedDriver",
    "next_step_from_llm",
    "plan_from_llm",
]
