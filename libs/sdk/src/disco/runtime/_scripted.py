"""``ScriptedDriver``: a model that answers from a script, for tests, demos and benchmarks.

A script is a list of replies, used in order, or a function that picks the
reply from what the model is asked. A reply is text, a :class:`Completion`, or
a :class:`ScriptedReply` that may call tools, stream in given chunks, report
usage and finish reasons, or fail.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from disco.runtime._drivers import (
    ChatChunk,
    ChatDriver,
    Completion,
    LLMError,
    ToolCallDelta,
    ToolSpec,
)
from disco.runtime._messages import CompletionOptions, Message, Usage

__all__ = ["ScriptedDriver", "ScriptedReply", "ScriptedRequest", "ScriptedToolCall"]


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A tool call in a script; without ``id`` one is derived from the conversation."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptedReply:
    """One scripted answer.

    Args:
        text: the answer's text.
        tool_calls: calls the model makes (``ScriptedToolCall``, or ``(name,
            arguments)`` pairs); their arguments stream in two pieces.
        chunks: the text's pieces as streamed (default: the text at once).
        finish_reason: default ``tool_calls`` with calls, else ``stop``.
        usage: default: about a token per four characters in and out.
        error: raised instead of answering.
    """

    text: str = ""
    tool_calls: Sequence[ScriptedToolCall | tuple[str, Mapping[str, Any] | str]] = ()
    chunks: Sequence[str] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """What the scripted model was asked (what a responder function receives)."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    options: CompletionOptions
    json_mode: bool

    @property
    def last(self) -> Message | None:
        """The last message of the conversation."""
        return self.messages[-1] if self.messages else None

    def last_user_text(self) -> str:
        """The content of the last user message ("" when there is none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""

    def tool_results(self) -> list[Message]:
        """The tool results since the last user message."""
        results: list[Message] = []
        for message in reversed(self.messages):
            if message.role == "user":
                break
            if message.role == "tool":
                results.append(message)
        return list(reversed(results))


Reply = str | Completion | ScriptedReply
Responder = Callable[[ScriptedRequest], "Reply | Awaitable[Reply]"]


def _estimate(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class ScriptedDriver(ChatDriver):
    """Answers with the next scripted reply; records everything it was asked.

    Args:
        replies: the answers, in order: text, :class:`Completion`,
            :class:`ScriptedReply`, or a function of the :class:`ScriptedRequest`
            returning one of those (for that turn).
        responder: answers every request the replies do not cover (a function
            of the :class:`ScriptedRequest`; it may be async).

    Attributes:
        calls: the messages of every request, in the chat format.
        requests: every request (messages, tools, options).

    Raises:
        LLMError: (when asked) the script ran out and there is no responder.
    """

    def __init__(
        self,
        replies: Iterable[Reply | Responder] = (),
        *,
        responder: Responder | None = None,
    ) -> None:
        self._replies: list[Reply | Responder] = list(replies)
        self._responder = responder
        self.calls: list[list[dict[str, Any]]] = []
        self.requests: list[ScriptedRequest] = []

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self._replies)

    async def _next_reply(self, request: ScriptedRequest) -> ScriptedReply:
        if self._replies:
            item: Reply | Responder = self._replies.pop(0)
        elif self._responder is not None:
            item = self._responder
        else:
            raise LLMError(
                f"the ScriptedDriver has no reply left for call {len(self.requests)}: add more "
                "replies to its script"
            )
        if callable(item) and not isinstance(item, str | Completion | ScriptedReply):
            produced = item(request)
            item = await produced if inspect.isawaitable(produced) else produced
        if isinstance(item, str):
            return ScriptedReply(text=item)
        if isinstance(item, Completion):
            return ScriptedReply(
                text=item.content,
                finish_reason=item.finish_reason or "stop",
                usage=Usage.of(item.prompt_tokens, item.completion_tokens),
            )
        if isinstance(item, ScriptedReply):
            return item
        raise LLMError(
            f"the ScriptedDriver's reply {item!r} is not text, a Completion or a ScriptedReply"
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions | None = None,
        json_mode: bool = False,
    ) -> AsyncIterator[ChatChunk]:
        request = ScriptedRequest(
            messages=tuple(messages),
            tools=tuple(tools),
            options=options or CompletionOptions(),
            json_mode=json_mode,
        )
        self.requests.append(request)
        self.calls.append([message.to_chat() for message in messages])
        reply = await self._next_reply(request)
        if reply.error is not None:
            raise reply.error
        for piece in (
            reply.chunks if reply.chunks is not None else [reply.text] if reply.text else []
        ):
            yield ChatChunk(text=piece)
        calls = [_scripted_call(item) for item in reply.tool_calls]
        seed = _conversation_seed(messages) if calls else ""
        for index, call in enumerate(calls):
            arguments = (
                call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(dict(call.arguments), separators=(",", ":"))
            )
            half = len(arguments) // 2
            call_id = call.id or f"call_{seed}_{index}"
            yield ChatChunk(
                tool_calls=(
                    ToolCallDelta(
                        index=index, id=call_id, name=call.name, arguments=arguments[:half]
                    ),
                )
            )
            yield ChatChunk(tool_calls=(ToolCallDelta(index=index, arguments=arguments[half:]),))
        prompt = sum(_estimate(message.content) for message in messages)
        usage = reply.usage or Usage.of(prompt, _estimate(reply.text) + 8 * len(calls))
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        yield ChatChunk(finish_reason=finish, usage=usage, model="scripted")


def _scripted_call(
    item: ScriptedToolCall | tuple[str, Mapping[str, Any] | str],
) -> ScriptedToolCall:
    if isinstance(item, ScriptedToolCall):
        return item
    name, arguments = item
    return ScriptedToolCall(name=name, arguments=arguments)


def _conversation_seed(messages: Sequence[Message]) -> str:
    # Tool-call ids must be unique within a session (approvals are matched on
    # them) and the same when the same conversation is replayed after a restart.
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.role.encode())
        digest.update(b"\x1f")
        digest.update(message.content.encode("utf-8", "replace"))
        for call in message.tool_calls:
            digest.update(call.id.encode())
        digest.update(b"\x1e")
    return digest.hexdigest()[:12]
