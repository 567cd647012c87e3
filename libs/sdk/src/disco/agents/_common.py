"""Pieces the layers share: capability derivation, deterministic ids, system events."""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from pydantic import BaseModel
from typing_extensions import Unpack

from disco.agents._errors import AgentDefinitionError
from disco.agents._handlers import HandlerSpec
from disco.bus import BusClient, ContextAttributes, MessageTooLargeError
from disco_common.a2a import A2AAnswer
from disco_common.registry import AgentCapability, EventDefinition
from disco_common.system_events import SystemEventData
from disco_common.topics import Topic

__all__ = [
    "answer",
    "capability_for",
    "derived_id",
    "publish_system_event",
    "result_schema",
]

_log = structlog.get_logger("disco.agents")

# Ids derived from other ids are stable across redeliveries: the same request
# handled twice produces envelopes with the same ids, which consumers deduplicate.
_NAMESPACE = uuid.UUID("5b0c0f8e-4d1e-4d2a-9a51-6f1c2d3e4f50")

_REQUEST_SUFFIX = re.compile(r"\.(requested|request|invoke|invoked|task|goal)$")
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


def derived_id(*parts: str) -> str:
    """A UUID determined by ``parts`` (the same parts always give the same id)."""
    return str(uuid.uuid5(_NAMESPACE, "/".join(parts)))


def _docstring_summary(func: Callable[..., Any]) -> str:
    doc = inspect.getdoc(func) or ""
    return doc.split("\n\n", 1)[0].strip()[:4000]


def _hoisted(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = dict(schema)
    defs = schema.pop("$defs", {})
    return schema, defs


def result_schema(result: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON Schema of an ``action-results`` payload whose ``result`` follows ``result``."""
    defs: dict[str, Any] = {}
    result_part: dict[str, Any] = {}
    if result is not None:
        result_part, defs = _hoisted(result)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "success": {"type": "boolean"},
            "result": result_part,
            "error": {
                "type": ["object", "null"],
                "properties": {
                    "type": {"type": "string"},
                    "message": {"type": "string"},
                    "details": {},
                },
            },
            "task_id": {"type": ["string", "null"]},
        },
        "required": ["success"],
    }
    if defs:
        schema["$defs"] = defs
    return schema


def capability_for(
    spec: HandlerSpec,
    event_type: str,
    *,
    capability: str | None,
    description: str | None,
    response_event: str | None,
) -> AgentCapability:
    """The capability a handler for ``event_type`` on ``action-requests`` offers.

    The request schema comes from the handler's input model; the response schema
    from its return annotation (Tools) — so the registry learns both contracts
    from the type hints alone.
    """
    base = _REQUEST_SUFFIX.sub("", event_type)
    task_name = capability or base
    if not _TASK_NAME.fullmatch(task_name):
        raise AgentDefinitionError(
            f"capability name {task_name!r} is not valid: use letters, digits and '._:/-'"
        )
    request_schema = spec.input_model.model_json_schema() if spec.input_model else None
    returned: dict[str, Any] | None = None
    if spec.return_adapter is not None:
        annotation = spec.return_annotation
        if inspect.isclass(annotation) and issubclass(annotation, A2AAnswer):
            returned = None  # shaped per answer: its `result` follows no one schema
        elif inspect.isclass(annotation) and issubclass(annotation, BaseModel):
            returned = annotation.model_json_schema()
        else:
            try:
                returned = spec.return_adapter.json_schema()
            except Exception:
                returned = None
    try:
        return AgentCapability(
            task_name=task_name,
            description=description or _docstring_summary(spec.func),
            consumed_event=EventDefinition(
                event_type=event_type,
                topic=Topic.ACTION_REQUESTS.value,
                description=f"Ask for {task_name}.",
                json_schema=request_schema,
            ),
            produced_events=[
                EventDefinition(
                    event_type=response_event or f"{base}.completed",
                    topic=Topic.ACTION_RESULTS.value,
                    description=(
                        f"The answer to {event_type} (sent as the caller's response_event): "
                        "{success, result} or {success: false, error}."
                    ),
                    json_schema=result_schema(returned),
                )
            ],
        )
    except ValueError as exc:
        raise AgentDefinitionError(
            f"cannot derive a capability for {event_type!r}: {exc}; pass capabilities=[...] "
            "to the agent explicitly"
        ) from None


async def publish_system_event(
    bus: BusClient,
    event_type: str,
    data: SystemEventData,
    *,
    id: str | None = None,
    plan_id: str | None = None,
    task_id: str | None = None,
    time: datetime | None = None,
) -> None:
    """Publish progress on ``system-events`` (what the tracker reads); never fails the caller.

    Progress is observability: a broker hiccup here must not fail the work itself.
    ``time``: when it happened, for progress announced after the fact (default: now).
    """
    try:
        await bus.publish(
            Topic.SYSTEM_EVENTS,
            event_type,
            data,
            id=id,
            plan_id=plan_id,
            task_id=task_id,
            time=time,
        )
    except Exception as exc:
        _log.warning("system event not published", event_type=event_type, error=repr(exc))


async def answer(
    bus: BusClient,
    event_type: str,
    outcome: dict[str, Any],
    *,
    correlation_id: str,
    topic: str | Topic,
    **attributes: Unpack[ContextAttributes],
) -> None:
    """Publish an answer (an ``ActionResultData`` dict) with ``bus.respond``.

    An answer too large for the bus is replaced by an error answer saying so:
    the caller is told, instead of waiting for an answer that never comes.
    """
    try:
        await bus.respond(
            event_type, outcome, correlation_id=correlation_id, topic=topic, **attributes
        )
    except MessageTooLargeError as exc:
        _log.warning("answer too large; answering with the error", event_type=event_type)
        failure: dict[str, Any] = {
            "success": False,
            "error": {"type": "MessageTooLargeError", "message": str(exc)[:4000]},
        }
        if "task_id" in outcome:
            failure["task_id"] = outcome["task_id"]
        await bus.respond(
            event_type, failure, correlation_id=correlation_id, topic=topic, **attributes
        )
