"""``OpenAIChatDriver``: any OpenAI-compatible chat-completions server, through the official SDK.

OpenAI itself, vLLM, llama.cpp, Ollama, LiteLLM... The ``openai`` SDK does the
HTTP: timeouts, retries with exponential backoff on connection errors, 408,
409, 429 and 5xx (honouring ``Retry-After``), SSE streaming. This module maps
disco's messages, tools and options onto it and its failures onto
:class:`LLMError` with a message that says what happened.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import structlog

from disco.runtime._drivers import (
    ChatAccumulator,
    ChatChunk,
    ChatDriver,
    ChatResponse,
    LLMError,
    ToolCallDelta,
    ToolSpec,
)
from disco.runtime._messages import CompletionOptions, Message, Usage

if TYPE_CHECKING:
    # The SDK costs most of a second of CPU to import; a process that never builds
    # a client (the gateway, every agent without an LLM) does not pay it.
    import openai

__all__ = ["OpenAIChatDriver"]

_log = structlog.get_logger("disco.runtime")

_NO_KEY = "disco-no-api-key"
"""Sent when no key is given: local servers ignore it; the SDK needs one."""


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    total = getattr(usage, "total_tokens", None)
    return Usage.of(prompt, completion, int(total) if total is not None else None)


class OpenAIChatDriver(ChatDriver):
    """A chat driver for any server speaking the OpenAI chat-completions API.

    Use ``async with`` (or ``start``/``stop``), or just call it: the client is
    opened on first use. ``base_url`` includes the API version, e.g.
    ``http://127.0.0.1:11434/v1``.

    Args:
        base_url: where ``/chat/completions`` lives (the SDK's default, OpenAI, if None).
        model: the model name to ask for.
        api_key: sent as a bearer token.
        timeout_seconds: per request (and per streamed read).
        max_retries: retries of connection errors, 408/409/429 and 5xx, with
            exponential backoff (the SDK's).
        streaming: stream answers (``agent.stream.chunk`` events as text comes);
            ``False`` asks for whole answers.
        extra_body: merged into every request (e.g. ``{"seed": 7}``).
        send_reasoning_effort: send ``reasoning_effort`` when the options set it
            (servers without reasoning models may refuse it).
        budget_tokens_as: how to send ``budget_tokens``: ``"thinking"`` (the
            ``{"thinking": {"type": "enabled", "budget_tokens": n}}`` body of
            Anthropic-compatible servers) or ``None`` (not sent, logged once).
        client: an ``openai.AsyncOpenAI`` to use instead of building one.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str = "gpt-4o-mini",
        api_key: str | None = None,
        *,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        streaming: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        send_reasoning_effort: bool = True,
        budget_tokens_as: Literal["thinking"] | None = None,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if not model:
            raise ValueError("OpenAIChatDriver needs a model name")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/") if base_url else None
        self.model = model
        self.api_key = api_key
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.streaming = streaming
        self.extra_body = dict(extra_body or {})
        self.send_reasoning_effort = send_reasoning_effort
        self.budget_tokens_as = budget_tokens_as
        self._client = client
        self._owns_client = client is None
        self._warned_budget = False

    @classmethod
    def from_env(cls, **overrides: Any) -> OpenAIChatDriver | None:
        """A driver from ``DISCO_LLM_BASE_URL``, ``DISCO_LLM_MODEL`` and ``DISCO_LLM_API_KEY``.

        Returns:
            The driver, or None when neither the base URL nor the model is set.
        """
        base_url = os.environ.get("DISCO_LLM_BASE_URL") or None
        model = os.environ.get("DISCO_LLM_MODEL") or None
        if base_url is None and model is None:
            return None
        settings: dict[str, Any] = {
            "base_url": base_url,
            "model": model or "gpt-4o-mini",
            "api_key": os.environ.get("DISCO_LLM_API_KEY") or None,
        }
        settings.update(overrides)
        return cls(**settings)

    @property
    def where(self) -> str:
        return self.base_url or "the OpenAI API"

    async def start(self) -> None:
        """Build the client (idempotent)."""
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY,
                timeout=self.timeout_seconds,
                max_retries=self.max_retries,
            )
            self._owns_client = True

    async def stop(self) -> None:
        """Close the client's connections (idempotent)."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.close()

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: CompletionOptions | None,
        json_mode: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [message.to_chat() for message in messages],
        }
        if tools:
            body["tools"] = [tool.to_chat() for tool in tools]
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        extra = dict(self.extra_body)
        if options is not None:
            for name in ("temperature", "top_p", "max_tokens", "presence_penalty"):
                value = getattr(options, name)
                if value is not None:
                    body[name] = value
            if options.frequency_penalty is not None:
                body["frequency_penalty"] = options.frequency_penalty
            if options.reasoning_effort is not None and self.send_reasoning_effort:
                body["reasoning_effort"] = options.reasoning_effort.value
            if options.budget_tokens is not None:
                if self.budget_tokens_as == "thinking":
                    extra["thinking"] = {"type": "enabled", "budget_tokens": options.budget_tokens}
                elif not self._warned_budget:
                    self._warned_budget = True
                    _log.info(
                        "budget_tokens is not sent: this driver was not told how the server "
                        "takes it (OpenAIChatDriver(budget_tokens_as='thinking'))",
                        model=self.model,
                    )
        if extra:
            body["extra_body"] = extra
        return body

    def _error(self, exc: Exception) -> LLMError:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return LLMError(
                f"the model server at {self.where} did not answer within {self.timeout_seconds}s "
                f"(after {self.max_retries} retries)"
            )
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(
                f"the model server at {self.where} could not be reached (after "
                f"{self.max_retries} retries): {exc.__cause__ or exc}"
            )
        if isinstance(exc, openai.APIStatusError):
            detail = exc.message or ""
            retried = (
                f" (after {self.max_retries} retries)"
                if exc.status_code in (408, 409, 429) or exc.status_code >= 500
                else ""
            )
            return LLMError(
                f"the model server at {self.where} answered {exc.status_code}{retried}: "
                f"{detail[:500]}"
            )
        return LLMError(f"the model server at {self.where} failed: {exc!r}"[:800])

    async def _client_or_start(self) -> openai.AsyncOpenAI:
        await self.start()
        assert self._client is not None
        return self._client

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: CompletionOptions | None = None,
        json_mode: bool = False,
    ) -> AsyncIterator[ChatChunk]:
        import openai

        client = await self._client_or_start()
        body = self._request(messages, tools, options, json_mode)
        if not self.streaming:
            yield await self._whole(client, body)
            return
        try:
            stream = await client.chat.completions.create(
                **body, stream=True, stream_options={"include_usage": True}
            )
            async with stream:
                async for chunk in stream:
                    yield _chunk(chunk)
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc

    async def _whole(self, client: openai.AsyncOpenAI, body: dict[str, Any]) -> ChatChunk:
        import openai

        try:
            completion = await client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        if not completion.choices:
            raise LLMError(f"the model server at {self.where} answered without a choice")
        choice = completion.choices[0]
        message = choice.message
        calls = tuple(
            ToolCallDelta(
                index=index,
                id=call.id,
                name=call.function.name,
                arguments=call.function.arguments or "",
            )
            for index, call in enumerate(message.tool_calls or ())
            if getattr(call, "function", None) is not None
        )
        return ChatChunk(
            text=message.content or "",
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=_usage(completion.usage),
            model=completion.model,
        )

    async def _whole_answer(
        self, messages: Sequence[Message], options: CompletionOptions, json_mode: bool
    ) -> ChatResponse:
        # What a Planner asks is not streamed: the widest range of servers answers it.
        client = await self._client_or_start()
        accumulator = ChatAccumulator()
        accumulator.add(await self._whole(client, self._request(messages, (), options, json_mode)))
        return accumulator.result()


def _chunk(chunk: Any) -> ChatChunk:
    usage = _usage(getattr(chunk, "usage", None))
    if not chunk.choices:
        return ChatChunk(usage=usage, model=chunk.model)
    choice = chunk.choices[0]
    delta = choice.delta
    text = ""
    calls: tuple[ToolCallDelta, ...] = ()
    if delta is not None:
        text = delta.content or ""
        calls = tuple(
            ToolCallDelta(
                index=call.index,
                id=call.id,
                name=call.function.name if call.function is not None else None,
                arguments=(call.function.arguments or "") if call.function is not None else "",
            )
            for call in delta.tool_calls or ()
        )
    return ChatChunk(
        text=text,
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        usage=usage,
        model=chunk.model,
    )
