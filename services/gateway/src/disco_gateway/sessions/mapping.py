"""One mapping from a bus envelope to the UI message a session stream shows.

:func:`to_session_event` serves single agents and teams alike: the member
context (``agent_id``, ``agent_name``, ``execution_id``) is whatever the event
carries, with no per-type branching. Every payload passes the one JSON-safe
serializer (:func:`disco.runtime.to_json_safe`), bounded. An envelope whose type
the gateway cannot show becomes an explicit ``ERROR`` message (never dropped,
never forwarded raw).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from disco.runtime import to_json_safe
from disco_common.envelope import Envelope
from disco_common.notifications import (
    AgentUIEventType,
    HumanInputRequest,
    HumanInputResponse,
    NotificationType,
)
from disco_common.sessions import SessionEvent, SessionEventType, StreamErrorCode

__all__ = ["StoredEvent", "to_session_event"]

_UI_TYPES = frozenset(kind.value for kind in AgentUIEventType)


@dataclass(frozen=True)
class StoredEvent:
    """A session event as the gateway keeps and fans it out."""

    tenant_id: str
    user_id: str | None
    event: SessionEvent
    ref: str | None
    """The tool call id (tool lifecycle) or question id (human input) the event is about."""
    text: str
    """``event`` as JSON, encoded once for every socket."""

    @property
    def id(self) -> str:
        assert self.event.id is not None
        return self.event.id

    @property
    def session_id(self) -> str:
        return self.event.session_id

    def row(self) -> dict[str, Any]:
        """The row ``gateway.store_session_events`` takes."""
        return {
            "tenant_id": self.tenant_id,
            "session_id": self.session_id,
            "event_id": self.id,
            "type": self.event.type,
            "ref": self.ref,
            "user_id": self.user_id,
            "event": self.event.model_dump(mode="json"),
        }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def to_session_event(envelope: Envelope, *, max_bytes: int) -> StoredEvent | None:
    """The UI message of ``envelope`` (a ``notification-events`` envelope), or None when it
    belongs to no session or no tenant (nothing a session stream can show)."""
    session_id, tenant_id = envelope.session_id, envelope.tenant_id
    if not session_id or not tenant_id:
        return None
    data = envelope.data if isinstance(envelope.data, dict) else {}
    fields: dict[str, Any] = {
        "id": envelope.id,
        "session_id": session_id,
        "timestamp": envelope.time,
        "execution_id": None,
        "agent_id": None,
        "agent_name": None,
    }
    ref: str | None = None
    kind, payload = envelope.type, data.get("payload") if "payload" in data else None
    if kind in _UI_TYPES:
        # The runtime's (or any agent's) AgentUIEvent: member context as it came.
        fields["execution_id"] = _text(data.get("execution_id"))
        fields["agent_id"] = _text(data.get("agent_id"))
        fields["agent_name"] = _text(data.get("agent_name"))
        body = payload if isinstance(payload, dict) else {}
        ref = _text(body.get("tool_call_id"))
    elif kind == NotificationType.HUMAN_INPUT.value:
        kind, body, ref = _question(envelope, data)
    elif (answer := _answer(data)) is not None:
        kind = SessionEventType.HUMAN_INPUT_ANSWERED.value
        ref = answer.request_id
        body = {
            "question_id": answer.request_id,
            "correlation_id": envelope.correlation_id,
            "answer": answer.answer,
            "timed_out": answer.timed_out,
            "answered_by": answer.answered_by,
        }
    else:
        kind = SessionEventType.ERROR.value
        body = {
            "code": StreamErrorCode.UNKNOWN_EVENT_TYPE.value,
            "message": f"an event of type {envelope.type!r} that no UI message describes",
            "event_type": envelope.type,
            "source": envelope.source,
        }
    safe = to_json_safe(body, max_bytes=max_bytes)
    fields["type"] = kind
    fields["payload"] = safe if isinstance(safe, dict) else {"value": safe}
    event = SessionEvent.model_validate(fields)
    return StoredEvent(
        tenant_id=tenant_id,
        user_id=envelope.user_id,
        event=event,
        ref=ref,
        text=event.model_dump_json(),
    )


def _question(envelope: Envelope, data: dict[str, Any]) -> tuple[str, Any, str | None]:
    try:
        asked = HumanInputRequest.model_validate(data)
    except ValidationError as exc:
        return (
            SessionEventType.ERROR.value,
            {
                "code": StreamErrorCode.UNKNOWN_EVENT_TYPE.value,
                "message": f"a malformed question to a human: {exc.errors()[0]['msg']}",
                "event_type": envelope.type,
            },
            None,
        )
    deadline = (
        envelope.time + timedelta(seconds=asked.timeout_seconds)
        if asked.timeout_seconds is not None
        else None
    )
    kind = asked.context.get("kind")
    return (
        SessionEventType.HUMAN_INPUT_REQUESTED.value,
        {
            "question_id": envelope.id,
            "question": asked.question,
            "correlation_id": envelope.correlation_id,
            "response_event": asked.response_event,
            "options": [option.model_dump(mode="json") for option in asked.options or ()] or None,
            "answer_schema": asked.answer_schema,
            "timeout_seconds": asked.timeout_seconds,
            "deadline": deadline.isoformat() if deadline is not None else None,
            "kind": kind if isinstance(kind, str) else None,
            "task_id": asked.task_id or envelope.task_id,
            "plan_id": asked.plan_id or envelope.plan_id,
            "context": asked.context,
        },
        envelope.id,
    )


def _answer(data: dict[str, Any]) -> HumanInputResponse | None:
    """``data`` as a human's answer (any type: answers are typed as their question says)."""
    if "answered_at" not in data:
        return None
    try:
        return HumanInputResponse.model_validate(data)
    except ValidationError:
        return None
