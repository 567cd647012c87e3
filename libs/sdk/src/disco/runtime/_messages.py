"""Chat messages, tool calls, token usage and completion options: what a state is made of."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "CompletionOptions",
    "Message",
    "ReasoningEffort",
    "Role",
    "ToolCall",
    "Usage",
]


class _Frozen(BaseModel):
    # Immutable-style values: change them with model_copy / the with_* methods.
    # Unknown fields (from a newer SDK) are ignored so that a newer snapshot still loads.
    model_config = ConfigDict(frozen=True, extra="ignore")


class ReasoningEffort(StrEnum):
    """How hard a reasoning model may think before it answers."""

    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class CompletionOptions(_Frozen):
    """Sampling and reasoning options of every completion an agent asks for.

    ``None`` leaves an option to the server's default. ``reasoning_effort`` and
    ``budget_tokens`` (an explicit thinking budget, as Anthropic's extended
    thinking takes it) are sent where the driver's server supports them.
    """

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, gt=0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    reasoning_effort: ReasoningEffort | None = None
    budget_tokens: int | None = Field(default=None, gt=0)

    def with_(self, **changes: Any) -> CompletionOptions:
        """A copy with ``changes`` applied (validated).

        Raises:
            pydantic.ValidationError: a change is not a valid option value.
        """
        return CompletionOptions.model_validate({**self.model_dump(), **changes})


class Usage(_Frozen):
    """Token counts of a step, or summed over steps."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )

    @classmethod
    def of(
        cls, prompt_tokens: int = 0, completion_tokens: int = 0, total: int | None = None
    ) -> Self:
        """Usage from the two counts (the total is their sum unless given)."""
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens if total is None else total,
        )


class Role(StrEnum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolCall(_Frozen):
    """A call the model asked for: the tool's name and its arguments as JSON text.

    The arguments are kept as the model wrote them (they may not even be valid
    JSON); :meth:`parsed_arguments` reads them.
    """

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object.

        Raises:
            ValueError: they are not a JSON object.
        """
        text = self.arguments.strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments of {self.name!r} are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"the arguments of {self.name!r} are not a JSON object: {text[:200]}")
        return value


class Message(_Frozen):
    """One chat message.

    An assistant message may carry ``tool_calls``; a tool message answers one
    of them (``tool_call_id``, ``name`` = the tool). ``metadata`` is the
    application's and never goes to the model.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role=Role.SYSTEM, content=content)

    @classmethod
    def user(cls, content: str, **metadata: JsonValue) -> Message:
        return cls(role=Role.USER, content=content, metadata=metadata)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role=Role.ASSISTANT, content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, tool_call_id: str, name: str, content: str, **metadata: JsonValue) -> Message:
        return cls(
            role=Role.TOOL, content=content, tool_call_id=tool_call_id, name=name, metadata=metadata
        )

    def to_chat(self) -> dict[str, Any]:
        """The message in the OpenAI chat-completions format."""
        message: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
            if not self.content:
                message["content"] = None
        if self.role is Role.TOOL:
            message["tool_call_id"] = self.tool_call_id
        return message
