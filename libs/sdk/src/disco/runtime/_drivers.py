"""The chat driver interface: one way to ask a model, streamed, with tools.

A driver's :meth:`ChatDriver.stream` yields :class:`ChatChunk` s (text deltas,
tool-call deltas, the finish reason, usage); :meth:`ChatDriver.chat` assembles
them into one :class:`ChatResponse` (tool-call deltas joined into calls).
:meth:`ChatDriver.complete` is the simple form a Planner uses
(:class:`disco.llm.LLMDriver`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from disco._completion import Completion, LLMError
from disco._lifecycle import StartStop
from disco.runtime._messages import CompletionOptions, Message, Role, ToolCall, Usage

__all__ = [
    "ChatAccumulator",
    "ChatChunk",
    "ChatDriver",
    "ChatResponse",
    "Completion",
    "LLMError",
    "ToolCallDelta",
    "ToolSpec",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON Schema of the arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def to_chat(self) -> dict[str, Any]:
        """The tool in the OpenAI chat-completions format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a tool call as it streams: the call at ``index`` grows by ``arguments``."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class ChatChunk:
    """One streamed piece of an answer."""

    text: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A whole answer: text, tool calls, why it finished, tokens used."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None


class ChatAccumulator:
    """Joins chunks into a :class:`ChatResponse` (tool-call deltas by index)."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None

    def add(self, chunk: ChatChunk) -> None:
        """Take one chunk in."""
        if chunk.text:
            self._text.append(chunk.text)
        for delta in chunk.tool_calls:
            call = self._calls.setdefault(delta.index, {"id": None, "name": "", "arguments": []})
            if delta.id:
                call["id"] = delta.id
            if delta.name:
                call["name"] += delta.name
            if delta.arguments:
                call["arguments"].append(delta.arguments)
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.model is not None:
            self.model = chunk.model

    def result(self) -> ChatResponse:
        """The answer so far.

        Raises:
            LLMError: a tool call streamed without a name.
        """
        calls: list[ToolCall] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call["name"]:
                raise LLMError(f"the model streamed tool call #{index} without a name")
            calls.append(
                ToolCall(
                    id=call["id"] or f"call_{index}",
                    name=call["name"],
                    arguments="".join(call["arguments"]) or "{}",
                )
            )
        finish = self.finish_reason
        if finish is None:
            finish = "tool_calls" if calls else "stop"
        return ChatResponse(
            content="".join(self._text),
            tool_calls=tuple(calls),
            finish_reason=finish,
            usage=self.usage or Usage(),
            model=self.model,
        )


ChunkCallback = Callable[[ChatChunk], Awaitable[None]]


def as_message(message: Message | Mapping[str, Any]) -> Message:
    if isinstance(message, Message):
        return message
    return Message(role=Role(message["role"]), content=str(message.get("content") or ""))


class ChatDriver(StartStop):
    """Asks a model for the next message of a chat, streamed.

    Subclasses implement :meth:`stream`. Drivers are async context managers
    (``async with driver:``); :meth:`start` and :meth:`stop` are idempotent.
    """

    async def start(self) -> None:
        """Open what the driver needs (idempotent)."""

    async def stop(self) -> None:
        """Close what the driver opened (idempotent)."""

    @abstractmethod
    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions | None = None,
        json_mode: bool = False,
    ) -> AsyncIterator[ChatChunk]:
        """Stream the model's next message.

        Raises:
            LLMError: the model could not be reached or answered with an error.
        """

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions | None = None,
        json_mode: bool = False,
        on_chunk: ChunkCallback | None = None,
    ) -> ChatResponse:
        """The model's next message, whole (``on_chunk`` sees each piece as it comes).

        Raises:
            LLMError: the model could not be reached or answered with an error.
        """
        accumulator = ChatAccumulator()
        async for chunk in self.stream(messages, tools=tools, options=options, json_mode=json_mode):
            accumulator.add(chunk)
            if on_chunk is not None:
                await on_chunk(chunk)
        return accumulator.result()

    async def complete(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> Completion:
        """The model's answer to ``messages`` as text (``json_mode``: one JSON object).

        What :class:`disco.llm.LLMDriver` asks of a driver; a Planner reasons with it.

        Raises:
            LLMError: the model could not be reached or answered with an error.
        """
        options = CompletionOptions(temperature=temperature, max_tokens=max_tokens)
        response = await self._whole_answer(
            [as_message(message) for message in messages], options, json_mode
        )
        return Completion(
            content=response.content,
            finish_reason=response.finish_reason,
            model=response.model,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
        )

    async def _whole_answer(
        self, messages: Sequence[Message], options: CompletionOptions, json_mode: bool
    ) -> ChatResponse:
        """The answer :meth:`complete` reads (drivers that can may skip streaming)."""
        return await self.chat(messages, options=options, json_mode=json_mode)
