"""LLM drivers: one interface, an OpenAI-compatible HTTP driver, a scripted driver."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict

import httpx

from disco._lifecycle import StartStop

__all__ = [
    "ChatMessage",
    "Completion",
    "LLMDriver",
    "LLMError",
    "OpenAICompatibleDriver",
    "ScriptedDriver",
]


class ChatMessage(TypedDict):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class Completion:
    """What the model answered."""

    content: str
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMError(RuntimeError):
    """The model could not be reached or answered with an error."""


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


class ScriptedDriver:
    """Answers with the next scripted reply; records every conversation it was given.

    Args:
        replies: the answers, in order (text, or a :class:`Completion`).

    Raises:
        LLMError: (from ``complete``) the script ran out.
    """

    def __init__(self, replies: Iterable[str | Completion]) -> None:
        self._replies = [
            reply
            if isinstance(reply, Completion)
            else Completion(content=reply, finish_reason="stop")
            for reply in replies
        ]
        self.calls: list[list[ChatMessage]] = []

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> Completion:
        self.calls.append(list(messages))
        if not self._replies:
            raise LLMError(
                f"the ScriptedDriver has no reply left for call {len(self.calls)}: add more "
                "replies to its script"
            )
        return self._replies.pop(0)


@dataclass
class OpenAICompatibleDriver(StartStop):
    """A driver for any server speaking the OpenAI chat-completions API.

    Use ``async with`` (or ``start``/``stop``). ``base_url`` includes the API
    version, e.g. ``http://127.0.0.1:11434/v1``.

    Args:
        base_url: where ``/chat/completions`` lives.
        model: the model name to ask for.
        api_key: sent as a bearer token when given.
        timeout_seconds: per request.
        extra_body: merged into every request (e.g. ``{"seed": 7}``).
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_seconds: float = 60.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    transport: httpx.AsyncBaseTransport | None = None
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    async def start(self) -> None:
        """Open the connection pool (idempotent)."""
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._http = httpx.AsyncClient(
                base_url=self.base_url.rstrip("/"),
                timeout=self.timeout_seconds,
                headers=headers,
                transport=self.transport,
            )

    async def stop(self) -> None:
        """Close the connection pool (idempotent)."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> Completion:
        await self.start()
        assert self._http is not None
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), **self.extra_body}
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        try:
            response = await self._http.post("/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise LLMError(
                f"the model server at {self.base_url} could not be reached: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise LLMError(
                f"the model server answered {response.status_code}: {response.text[:500]}"
            )
        try:
            payload = response.json()
            choice = payload["choices"][0]
            content = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(
                f"unexpected answer from the model server: {response.text[:500]}"
            ) from exc
        usage = payload.get("usage") or {}
        return Completion(
            content=content,
            finish_reason=choice.get("finish_reason"),
            model=payload.get("model"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
