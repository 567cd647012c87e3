"""The UI adapter (seed 000): runtime events → the one stable UI envelope, on the bus.

:class:`UIEventAdapter` maps each :class:`~disco.runtime.RuntimeEvent` to
:class:`~disco_common.notifications.AgentUIEvent` s (``{type, session_id,
execution_id, agent_id, agent_name, timestamp, payload}``), every payload
through :func:`to_json_safe`. :class:`BusEventSink` publishes them on
``notification-events``: one envelope per UI event, CloudEvents ``type`` = the
UI type, keyed by the session, with the session's tenant and user.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from disco._context import maybe_current_context
from disco.runtime._events import (
    ApprovalDecided,
    ApprovalRequested,
    ContinuationEvaluated,
    RuntimeEvent,
    StatusChanged,
    StepCompleted,
    StepStarted,
    StreamChunk,
    ToolFinished,
    ToolLogged,
    ToolStarted,
)
from disco.runtime._json_safe import to_json_safe
from disco.runtime._outcomes import ContinuationOutcome
from disco_common.envelope import Notification
from disco_common.notifications import AgentUIEvent, AgentUIEventType
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.bus import BusClient

__all__ = [
    "BusEventSink",
    "UIEventAdapter",
    "publish_ui_event",
    "summarize_args",
    "summarize_result",
    "ui_envelope",
]

_log = structlog.get_logger("disco.runtime")

_PAYLOAD_MAX_BYTES = 64 * 1024


def _cut(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summarize_args(arguments: Any) -> str:
    """``key: 'value', other: 3`` for the first three arguments, each value cut at 30 characters."""
    if not isinstance(arguments, dict):
        return _cut(_json(arguments), 200) or ""
    parts = []
    for key, value in list(arguments.items())[:3]:
        text = f"'{value}'" if isinstance(value, str) else _json(value)
        if len(text) > 30:
            text = text[:27] + "..."
        parts.append(f"{key}: {text}")
    if len(arguments) > 3:
        parts.append("...")
    return ", ".join(parts)


def summarize_result(result: Any) -> str | None:
    """The result as text, cut at 100 characters (None for None)."""
    if result is None:
        return None
    text = result if isinstance(result, str) else _json(result)
    return text if len(text) <= 100 else text[:97] + "..."


def _json(value: Any) -> str:
    return json.dumps(to_json_safe(value, max_bytes=4096), ensure_ascii=False)


def _error_text(error: BaseException | str | None) -> str | None:
    if error is None:
        return None
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return error


def _continuation(outcome: ContinuationOutcome, *, evaluations: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "step_number": outcome.step_number or None,
        "should_continue": outcome.should_continue,
        "stop_reason": outcome.stop_reason,
        "resolved_by": outcome.resolved_by,
    }
    if evaluations:
        payload["evaluations"] = [
            {"criterion": e.criterion, "decision": e.decision.value, "reason": _cut(e.reason, 2000)}
            for e in outcome.evaluations
        ]
    return payload


class UIEventAdapter:
    """Maps runtime events to UI envelopes.

    Args:
        agent_name: shown as ``agent_name`` in every envelope.
        include_continuation: add the continuation outcome to
            ``agent.step.completed`` and emit ``agent.continuation`` with every
            criterion's evaluation (off by default: debugging detail).
        stream_chunks: emit ``agent.stream.chunk`` for streamed text.
    """

    def __init__(
        self,
        *,
        agent_name: str | None = None,
        include_continuation: bool = False,
        stream_chunks: bool = True,
    ) -> None:
        self.agent_name = agent_name
        self.include_continuation = include_continuation
        self.stream_chunks = stream_chunks

    def events(self, event: RuntimeEvent) -> list[AgentUIEvent]:
        """The UI envelopes of ``event`` (none, one, or two for a tool call's start and end)."""
        return [self._envelope(event, kind, payload) for kind, payload in self._payloads(event)]

    def _envelope(
        self, event: RuntimeEvent, kind: AgentUIEventType, payload: dict[str, Any]
    ) -> AgentUIEvent:
        safe = to_json_safe(payload, max_bytes=_PAYLOAD_MAX_BYTES)
        return AgentUIEvent.model_construct(
            type=kind,
            session_id=event.session_id,
            execution_id=event.execution_id,
            agent_id=event.agent_id,
            agent_name=self.agent_name,
            timestamp=event.timestamp,
            payload=safe if isinstance(safe, dict) else {"value": safe},
        )

    def _payloads(self, event: RuntimeEvent) -> list[tuple[AgentUIEventType, dict[str, Any]]]:
        if isinstance(event, StatusChanged):
            return [
                (
                    AgentUIEventType.AGENT_STATUS,
                    {
                        "status": event.status.value,
                        "step_count": event.step_count,
                        "error_message": _cut(event.error, 4000),
                        "last_response": _cut(event.last_response, 4000),
                    },
                )
            ]
        if isinstance(event, StepStarted):
            return [
                (
                    AgentUIEventType.STEP_STARTED,
                    {
                        "step_number": event.step_number,
                        "message_count": event.message_count,
                        "available_tools": list(event.available_tools),
                    },
                )
            ]
        if isinstance(event, StepCompleted):
            step = event.step
            payload: dict[str, Any] = {
                "step_number": step.number,
                "has_tool_calls": bool(step.tool_calls),
                "errors": len(step.errors),
                "finish_reason": _cut(step.finish_reason, 50),
                "usage": step.usage.model_dump(),
                "duration_ms": step.duration_ms,
            }
            if self.include_continuation and event.continuation is not None:
                payload["continuation"] = _continuation(event.continuation, evaluations=False)
            return [(AgentUIEventType.STEP_COMPLETED, payload)]
        if isinstance(event, StreamChunk):
            if not self.stream_chunks:
                return []
            return [
                (
                    AgentUIEventType.STREAM_CHUNK,
                    {
                        "chunk": event.chunk,
                        "is_complete": event.is_complete,
                        "tokens_delta": event.tokens_delta,
                    },
                )
            ]
        if isinstance(event, ContinuationEvaluated):
            if not self.include_continuation:
                return []
            return [(AgentUIEventType.CONTINUATION, _continuation(event.outcome, evaluations=True))]
        return self._tool_payloads(event)

    def _tool_payloads(self, event: RuntimeEvent) -> list[tuple[AgentUIEventType, dict[str, Any]]]:
        if isinstance(event, ApprovalRequested):
            return [
                (
                    AgentUIEventType.TOOL_APPROVAL_REQUESTED,
                    {
                        "tool_call_id": event.call.id,
                        "tool_name": event.call.name,
                        "arguments": event.arguments,
                        "reason": _cut(event.reason, 2000),
                        "timeout_seconds": event.timeout_seconds,
                        "deadline": event.deadline,
                    },
                )
            ]
        if isinstance(event, ApprovalDecided):
            kind = (
                AgentUIEventType.TOOL_APPROVED if event.approved else AgentUIEventType.TOOL_DENIED
            )
            return [
                (
                    kind,
                    {
                        "tool_call_id": event.tool_call_id,
                        "tool_name": event.tool_name,
                        "decided_by": event.decided_by,
                        "reason": _cut(event.reason, 2000),
                    },
                )
            ]
        if isinstance(event, ToolStarted):
            return [
                (
                    AgentUIEventType.TOOL_STARTED,
                    {
                        "tool_name": event.call.name,
                        "tool_call_id": event.call.id,
                        "args_summary": _cut(summarize_args(event.arguments), 2000),
                    },
                ),
                (
                    AgentUIEventType.TOOL_EXECUTION_STARTED,
                    {
                        "tool_call_id": event.call.id,
                        "tool_name": event.call.name,
                        "arguments": event.arguments,
                    },
                ),
            ]
        if isinstance(event, ToolFinished):
            return self._finished(event)
        if isinstance(event, ToolLogged):
            return [
                (
                    AgentUIEventType.TOOL_LOG,
                    {
                        "tool_call_id": event.tool_call_id,
                        "tool_name": event.tool_name,
                        "level": _cut(event.level, 20),
                        "message": _cut(event.message, 8000),
                    },
                )
            ]
        return []

    def _finished(self, event: ToolFinished) -> list[tuple[AgentUIEventType, dict[str, Any]]]:
        error = _error_text(event.error)
        compact = (
            AgentUIEventType.TOOL_COMPLETED,
            {
                "tool_name": event.call.name,
                "tool_call_id": event.call.id,
                "success": event.success,
                "error": _cut(error, 4000),
                "duration_ms": event.duration_ms,
                "result_summary": _cut(summarize_result(event.result), 2000),
            },
        )
        if not event.executed:
            return [compact]
        if event.success:
            lifecycle = (
                AgentUIEventType.TOOL_EXECUTION_SUCCEEDED,
                {
                    "tool_call_id": event.call.id,
                    "tool_name": event.call.name,
                    "result": event.result,
                    "duration_ms": event.duration_ms,
                },
            )
        else:
            kind = type(event.error).__name__ if isinstance(event.error, BaseException) else "error"
            message = str(event.error) if event.error is not None else ""
            lifecycle = (
                AgentUIEventType.TOOL_EXECUTION_FAILED,
                {
                    "tool_call_id": event.call.id,
                    "tool_name": event.call.name,
                    "error": {"type": _cut(kind, 200), "message": _cut(message, 4000)},
                    "duration_ms": event.duration_ms,
                },
            )
        return [compact, lifecycle]


class BusEventSink:
    """Publishes runtime events as UI envelopes on ``notification-events``.

    One envelope per UI event: ``type`` = the UI type, ``session_id`` and
    ``correlation_id`` = the session (so a session's events share a partition
    and keep their order), the given tenant and user, ``data`` = the
    :class:`AgentUIEvent` JSON. Envelopes are queued without waiting; the loop's
    :meth:`flush` waits for the broker's acknowledgements. UI events are
    telemetry: a failure to publish is logged, never raised into the loop.

    Args:
        bus: a started bus client.
        adapter: how events become UI envelopes.
        tenant_id: the session's tenant.
        user_id: the session's user.
    """

    def __init__(
        self,
        bus: BusClient,
        adapter: UIEventAdapter,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        self.bus = bus
        self.adapter = adapter
        self.tenant_id = tenant_id
        self.user_id = user_id
        self._pending: list[asyncio.Future[Any]] = []

    def envelope(self, event: AgentUIEvent) -> Notification:
        """The envelope that carries ``event``."""
        return ui_envelope(
            event, source=self.bus.source, tenant_id=self.tenant_id, user_id=self.user_id
        )

    async def emit(self, event: RuntimeEvent) -> None:
        for ui_event in self.adapter.events(event):
            try:
                ack = await self.bus.send_envelope(
                    Topic.NOTIFICATION_EVENTS, self.envelope(ui_event)
                )
            except Exception as exc:
                _log.warning(
                    "a UI event could not be published",
                    type=ui_event.type.value,
                    session_id=ui_event.session_id,
                    error=repr(exc),
                )
                continue
            self._pending.append(ack)

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        for result in await asyncio.gather(*pending, return_exceptions=True):
            if isinstance(result, BaseException):
                _log.warning("a UI event was not acknowledged by the broker", error=repr(result))


def ui_envelope(
    event: AgentUIEvent,
    *,
    source: str,
    tenant_id: str | None = None,
    user_id: str | None = None,
) -> Notification:
    """The ``notification-events`` envelope that carries UI event ``event``.

    CloudEvents ``type`` = the UI type, ``session_id`` and ``correlation_id`` = the
    session (one partition per session: its events keep their order), ``data`` =
    the :class:`AgentUIEvent` JSON; inside a handler the handled envelope is its
    cause and its trace continues.
    """
    context = maybe_current_context()
    fields: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "time": datetime.now(UTC),
        "source": source,
        "type": event.type.value,
        "data": event.model_dump(mode="json"),
        "session_id": event.session_id,
        "correlation_id": event.session_id,
    }
    if tenant_id is not None:
        fields["tenant_id"] = tenant_id
    if user_id is not None:
        fields["user_id"] = user_id
    if context is not None:
        fields["causation_id"] = context.envelope.id
        if context.envelope.traceparent is not None:
            fields["traceparent"] = context.envelope.traceparent
    envelope = Notification.from_dict(fields)
    assert isinstance(envelope, Notification)
    return envelope


async def publish_ui_event(
    bus: BusClient,
    type: AgentUIEventType | str,
    payload: Any,
    *,
    session_id: str,
    execution_id: str | None = None,
    agent_id: str | None = None,
    agent_name: str | None = None,
    tenant_id: str | None = None,
    user_id: str | None = None,
) -> Notification:
    """Publish one UI event for a session, from any agent (not only the runtime's loop).

    UIs watching the session through the gateway
    (``/v1/sessions/{session_id}/stream``) receive it as
    ``{id, type, session_id, execution_id, agent_id, agent_name, timestamp, payload}``.
    ``payload`` goes through :func:`to_json_safe` (cycles, bytes, huge values become
    bounded JSON), so anything may be passed. Inside a handler, the tenant and user
    default to the handled envelope's.

    Args:
        bus: a started bus client.
        type: a UI type (``agent.status``, ``TOOL_LOG``, … see
            :class:`~disco_common.notifications.AgentUIEventType`).
        payload: the payload (the type's model's fields, e.g. ``{"status": "in_progress"}``).
        session_id: the session it belongs to.
        execution_id: the run within the session (the session id when omitted).
        agent_id: the agent (team member) it comes from (defaults to ``bus.name``).
        agent_name: its display name (defaults to ``agent_id``).
        tenant_id: the session's tenant (the handled envelope's when omitted; the gateway
            shows no event without a tenant).
        user_id: the session's user (the handled envelope's when omitted).

    Returns:
        The envelope published (its ``id`` is the UI message's ``id``).

    Raises:
        ValueError: ``type`` is not a UI type.
    """
    try:
        kind = AgentUIEventType(type)
    except ValueError:
        known = ", ".join(k.value for k in AgentUIEventType)
        raise ValueError(f"{type!r} is not a UI event type; known: {known}") from None
    context = maybe_current_context()
    if context is not None:
        tenant_id = tenant_id or context.envelope.tenant_id
        user_id = user_id or context.envelope.user_id
    safe = to_json_safe(payload, max_bytes=_PAYLOAD_MAX_BYTES)
    agent = agent_id or bus.name
    event = AgentUIEvent.model_construct(
        type=kind,
        session_id=session_id,
        execution_id=execution_id or session_id,
        agent_id=agent,
        agent_name=agent_name or agent,
        timestamp=datetime.now(UTC),
        payload=safe if isinstance(safe, dict) else {"value": safe},
    )
    envelope = ui_envelope(event, source=bus.source, tenant_id=tenant_id, user_id=user_id)
    return await bus.publish_envelope(Topic.NOTIFICATION_EVENTS, envelope)  # type: ignore[return-value]
