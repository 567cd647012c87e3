"""Serializers of :class:`AgentState`: full (lossless, versioned) and slim (bounded, seed 000).

Both have ``serialize(state) -> dict`` and ``deserialize(dict) -> AgentState``.

**Full** keeps every field exactly: ``deserialize(serialize(s)) == s``. Its
JSON carries ``schema_version``; JSON of every earlier version still loads
(fields it did not have take their defaults):

======= ===================================================================
version what it holds
======= ===================================================================
1       ids, status, messages, execution buffer, steps, usage, timing
        (``cumulative_seconds``), sampling options, metadata
2       + ``options.reasoning_effort`` and ``options.budget_tokens`` (seed
        002), ``execution.execution_seconds``, the system prompt, summary,
        last continuation outcome, the in-flight step and approval wait
======= ===================================================================

**Slim** keeps what a UI shows and what a new turn needs: the most recent
messages (content cut at ``max_content_length``, tool arguments redacted on
request, tool results optional), step summaries, usage, timing, options and
metadata; never provider payloads. It deserializes into a state that can take
the next user message (the execution under way, if any, is not kept: its
status becomes ``paused``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from disco.runtime._json_safe import to_json_safe
from disco.runtime._messages import Message, Role
from disco.runtime._state import AgentState, AgentStatus

__all__ = [
    "FULL_FORMAT",
    "FULL_SCHEMA_VERSION",
    "SLIM_FORMAT",
    "SLIM_SCHEMA_VERSION",
    "FullSerializer",
    "SlimConfig",
    "SlimSerializer",
    "StateSerializationError",
    "StateSerializer",
]

FULL_FORMAT = "disco.agent_state.full"
FULL_SCHEMA_VERSION = 2
SLIM_FORMAT = "disco.agent_state.slim"
SLIM_SCHEMA_VERSION = 1

_TOOL_KEYS = ("tool_calls", "tool_call_id", "tool_name")
_OMITTED = "[tool result omitted]"


class StateSerializationError(ValueError):
    """JSON that is not an agent state this SDK can read (the message names the field)."""


class StateSerializer(Protocol):
    """Turns states into JSON data and back."""

    def serialize(self, state: AgentState) -> dict[str, Any]:
        """``state`` as JSON data."""
        ...

    def deserialize(self, data: Mapping[str, Any]) -> AgentState:
        """The state ``data`` holds.

        Raises:
            StateSerializationError: ``data`` is not such a state.
        """
        ...


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False)[:10]:
        where = ".".join(str(part) for part in error["loc"]) or "(the state)"
        given = error.get("input")
        shown = json.dumps(given, default=str)[:80] if not isinstance(given, dict | list) else ""
        problems.append(f"{where}: {error['msg']}" + (f" (got {shown})" if shown else ""))
    return "; ".join(problems)


def _version(data: Mapping[str, Any], what: str, current: int) -> int:
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StateSerializationError(
            f"cannot load the {what} agent state: schema_version must be a positive integer, "
            f"got {version!r}"
        )
    if version > current:
        raise StateSerializationError(
            f"cannot load the {what} agent state: it was written with schema_version {version}, "
            f"this SDK reads up to {current}; upgrade disco-sdk"
        )
    return version


def _check(data: Any, what: str, expected: str, current: int) -> int:
    """The schema version of ``data``, once it is known to be this serializer's JSON."""
    if not isinstance(data, Mapping):
        raise StateSerializationError(
            f"cannot load the {what} agent state: expected a JSON object, got {type(data).__name__}"
        )
    kind = data.get("format", expected)
    if kind != expected:
        other = "SlimSerializer" if kind == SLIM_FORMAT else "FullSerializer"
        raise StateSerializationError(
            f"cannot load the {what} agent state: its format is {kind!r}, not {expected!r} "
            f"(use {other})"
        )
    return _version(data, what, current)


def _upgrade_full_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 2 only added fields; the model's defaults fill them in.
    return data


_FULL_UPGRADES = {1: _upgrade_full_1_to_2}


class FullSerializer:
    """Lossless, versioned JSON of a state (what resuming a session reads)."""

    format = FULL_FORMAT
    schema_version = FULL_SCHEMA_VERSION

    def serialize(self, state: AgentState) -> dict[str, Any]:
        """Every field of ``state`` as JSON data, with ``format`` and ``schema_version``."""
        data: dict[str, Any] = {"format": FULL_FORMAT, "schema_version": FULL_SCHEMA_VERSION}
        data.update(state.model_dump(mode="json"))
        return data

    def deserialize(self, data: Mapping[str, Any]) -> AgentState:
        """The state ``data`` holds (any schema version up to this SDK's).

        Raises:
            StateSerializationError: not a full state, a newer schema version, or
                a field that does not fit (named in the message, e.g. an unknown
                ``options.reasoning_effort``).
        """
        version = _check(data, "full", FULL_FORMAT, FULL_SCHEMA_VERSION)
        body = {
            key: value for key, value in data.items() if key not in ("format", "schema_version")
        }
        while version < FULL_SCHEMA_VERSION:
            body = _FULL_UPGRADES[version](body)
            version += 1
        try:
            return AgentState.model_validate(body)
        except ValidationError as exc:
            raise StateSerializationError(
                f"cannot load the full agent state: {_validation_message(exc)}"
            ) from None


@dataclass(frozen=True, slots=True)
class SlimConfig:
    """What a slim snapshot keeps (seed 000's defaults are :meth:`standard`).

    Args:
        max_messages: the most recent messages kept (and as many of the
            execution buffer).
        max_steps: the most recent step summaries kept.
        max_content_length: characters of a message's content kept; longer
            content is cut and marked ``"truncated": true``.
        include_tool_results: keep tool results' content (else a placeholder).
        include_steps: keep step summaries.
        include_continuation_trace: keep the last continuation outcome.
        redact_tool_args: keep only the id and name of tool calls.
    """

    max_messages: int = 50
    max_steps: int = 20
    max_content_length: int = 2000
    include_tool_results: bool = True
    include_steps: bool = True
    include_continuation_trace: bool = False
    redact_tool_args: bool = False

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_steps", "max_content_length"):
            if getattr(self, name) < 0:
                raise ValueError(f"SlimConfig.{name} must be >= 0, got {getattr(self, name)}")

    @classmethod
    def minimal(cls) -> SlimConfig:
        """20 messages of at most 500 characters, no tool results, no steps."""
        return cls(
            max_messages=20,
            max_steps=0,
            max_content_length=500,
            include_tool_results=False,
            include_steps=False,
        )

    @classmethod
    def standard(cls) -> SlimConfig:
        """50 messages of at most 2,000 characters, 20 steps, tool results kept."""
        return cls()

    @classmethod
    def full(cls) -> SlimConfig:
        """100 messages of at most 5,000 characters, 50 steps, the continuation trace."""
        return cls(
            max_messages=100,
            max_steps=50,
            max_content_length=5000,
            include_tool_results=True,
            include_steps=True,
            include_continuation_trace=True,
        )


class SlimSerializer:
    """Bounded JSON of a state for UIs, cheap reads and a fallback resume (seed 000).

    Args:
        config: what to keep (default :meth:`SlimConfig.standard`).
    """

    format = SLIM_FORMAT
    schema_version = SLIM_SCHEMA_VERSION

    def __init__(self, config: SlimConfig | None = None) -> None:
        self.config = config if config is not None else SlimConfig.standard()

    def serialize(self, state: AgentState) -> dict[str, Any]:
        """The slim JSON of ``state``."""
        config = self.config
        messages, omitted = self._messages(state.messages)
        buffer, buffer_omitted = self._messages(state.execution_buffer)
        usage = state.usage
        timing = state.execution
        data: dict[str, Any] = {
            "format": SLIM_FORMAT,
            "schema_version": SLIM_SCHEMA_VERSION,
            "agent_id": state.agent_id,
            "parent_agent_id": state.parent_agent_id,
            "session_id": state.session_id,
            "execution_id": state.execution_id,
            "status": state.status.value,
            "error": self._cut(state.error)[0] if state.error is not None else None,
            "step_count": state.step_count,
            "usage": {
                "prompt": usage.prompt_tokens,
                "completion": usage.completion_tokens,
                "total": usage.total_tokens,
            },
            "execution": {
                "started_at": timing.started_at.isoformat(),
                "updated_at": timing.updated_at.isoformat(),
                "cumulative_seconds": timing.cumulative_seconds,
                "execution_seconds": timing.execution_seconds,
            },
            "options": state.options.model_dump(mode="json", exclude_none=True),
            "messages": messages,
            "messages_omitted": omitted,
            "execution_buffer": buffer,
            "execution_buffer_omitted": buffer_omitted,
            "steps": self._steps(state) if config.include_steps else [],
            "last_continuation": self._continuation(state),
            "approval": self._approval(state),
            "metadata": to_json_safe(
                state.metadata, max_bytes=max(4096, config.max_content_length * 4)
            ),
        }
        return data

    def _cut(self, content: str) -> tuple[str, bool]:
        limit = self.config.max_content_length
        if len(content) <= limit:
            return content, False
        return content[:limit] + "…", True

    def _messages(self, messages: tuple[Message, ...]) -> tuple[list[dict[str, Any]], int]:
        limit = self.config.max_messages
        kept = messages[-limit:] if limit else ()
        return [self._message(message) for message in kept], len(messages) - len(kept)

    def _message(self, message: Message) -> dict[str, Any]:
        config = self.config
        metadata: dict[str, Any] = dict(message.metadata)
        if message.tool_calls:
            metadata["tool_calls"] = [
                {"id": call.id, "name": call.name}
                if config.redact_tool_args
                else {"id": call.id, "name": call.name, "arguments": self._cut(call.arguments)[0]}
                for call in message.tool_calls
            ]
        content = message.content
        if message.role is Role.TOOL:
            metadata["tool_call_id"] = message.tool_call_id
            metadata["tool_name"] = message.name
            if not config.include_tool_results:
                content = _OMITTED
        content, truncated = self._cut(content)
        entry: dict[str, Any] = {"role": message.role.value, "content": content}
        entry["metadata"] = (
            to_json_safe(metadata, max_bytes=max(2048, config.max_content_length * 2))
            if metadata
            else {}
        )
        if truncated:
            entry["truncated"] = True
        return entry

    def _steps(self, state: AgentState) -> list[dict[str, Any]]:
        limit = self.config.max_steps
        steps = state.steps[-limit:] if limit else ()
        return [
            {
                "step_number": step.number,
                "type": step.type.value,
                "has_tool_calls": bool(step.tool_calls),
                "finish_reason": step.finish_reason,
                "errors": len(step.errors),
                "usage": {"total": step.usage.total_tokens},
                "duration_ms": step.duration_ms,
                "tool_calls": [{"id": call.id, "name": call.name} for call in step.tool_calls],
            }
            for step in steps
        ]

    def _continuation(self, state: AgentState) -> dict[str, Any] | None:
        outcome = state.last_continuation
        if outcome is None or not self.config.include_continuation_trace:
            return None
        return {
            "step_number": outcome.step_number,
            "should_continue": outcome.should_continue,
            "stop_reason": outcome.stop_reason,
            "resolved_by": outcome.resolved_by,
            "evaluations": [
                {"criterion": e.criterion, "decision": e.decision.value, "reason": e.reason}
                for e in outcome.evaluations
            ],
        }

    def _approval(self, state: AgentState) -> dict[str, Any] | None:
        wait = state.approval
        if wait is None:
            return None
        approval: dict[str, Any] = {
            "tool_call_id": wait.tool_call_id,
            "tool_name": wait.tool_name,
            "deadline": wait.deadline.isoformat() if wait.deadline else None,
        }
        if not self.config.redact_tool_args:
            approval["arguments"] = to_json_safe(
                wait.arguments, max_bytes=max(1024, self.config.max_content_length)
            )
        return approval

    def deserialize(self, data: Mapping[str, Any]) -> AgentState:
        """A state that can take the next user message, from slim JSON.

        Messages are those kept (cut content stays cut); steps, the execution
        buffer and an approval wait are not restored, and an execution that
        was under way becomes ``paused``.

        Raises:
            StateSerializationError: not a slim state, or a field that does not fit.
        """
        _check(data, "slim", SLIM_FORMAT, SLIM_SCHEMA_VERSION)
        status = data.get("status", AgentStatus.PAUSED.value)
        if status in (AgentStatus.IN_PROGRESS.value, AgentStatus.AWAITING_APPROVAL.value):
            status = AgentStatus.PAUSED.value
        usage = data.get("usage") or {}
        try:
            messages = [
                {
                    "role": entry.get("role"),
                    "content": entry.get("content", ""),
                    "metadata": {
                        key: value
                        for key, value in (entry.get("metadata") or {}).items()
                        if key not in _TOOL_KEYS
                    },
                }
                for entry in data.get("messages") or []
                if entry.get("role") in (Role.USER.value, Role.ASSISTANT.value, Role.SYSTEM.value)
            ]
            return AgentState.model_validate(
                {
                    "agent_id": data.get("agent_id"),
                    "parent_agent_id": data.get("parent_agent_id"),
                    "session_id": data.get("session_id"),
                    "execution_id": data.get("execution_id"),
                    "status": status,
                    "error": data.get("error"),
                    "messages": messages,
                    "usage": {
                        "prompt_tokens": usage.get("prompt", 0),
                        "completion_tokens": usage.get("completion", 0),
                        "total_tokens": usage.get("total", 0),
                    },
                    "execution": data.get("execution") or {},
                    "options": data.get("options") or {},
                    "metadata": data.get("metadata") or {},
                }
            )
        except (ValidationError, AttributeError, TypeError) as exc:
            detail = _validation_message(exc) if isinstance(exc, ValidationError) else f"{exc}"
            raise StateSerializationError(f"cannot load the slim agent state: {detail}") from None
