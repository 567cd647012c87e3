"""The mapping between MCP and disco's envelopes (the MCP door's only one).

A call (``tools/call``) → an ``action-requests`` envelope, as an A2A task of the
tool's agent (:func:`request_message` is the caller's message of that task).
What comes back on the bus:

- ``task.started``, ``task.progress`` (system-events) and a partial answer
  (``action.progressed``) → ``notifications/progress`` with their text
  (:func:`progress_text`), when the call has a ``progressToken``;
- the answer → a ``CallToolResult`` (:func:`answer_result`): the ``result`` as
  ``structuredContent`` with its JSON as text; an agent's ``A2AAnswer`` as its
  parts (text, data as JSON text, images, files as embedded resources, URLs as
  resource links); an error answer as ``isError`` with its type and message;
- a question to a human (``notification.human_input``) → an ``elicitation/create``
  form (:func:`elicitation_form`): free text, a choice of its options, or its
  answer schema when that is a flat object of strings, numbers and booleans;
  the form's content comes back as the human's answer (:func:`form_answer`);
  a declined or cancelled form, or content that breaks the question, is the
  agent's timeout path. A client that cannot answer forms gets
  :func:`question_result`, which says how to answer over HTTP or A2A;
- no answer within the call's wait → :func:`timeout_result`, naming the task.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import JsonValue, ValidationError

from disco.a2a import A2AGatewayHelper, A2AMappingError
from disco_common.a2a import (
    ACTION_PROGRESSED,
    A2AAnswer,
    A2AMessage,
    A2APart,
    A2ARole,
    A2ATaskState,
    ActionProgressedData,
)
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputRequest
from disco_common.registry import validate_payload
from disco_common.system_events import SystemEventType, TaskProgressData
from disco_common.tasks import ActionResultData, TaskStatus
from disco_gateway.mcp.tools import ToolEntry

__all__ = [
    "DECLINED",
    "Declined",
    "Form",
    "Streamed",
    "answer_result",
    "elicitation_form",
    "form_answer",
    "invalid_arguments_result",
    "progress_text",
    "question_result",
    "request_message",
    "timeout_result",
]

ANSWER = "answer"
"""The form field of a question answered with one value (text, a choice, a number...)."""
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})


class Declined:
    """The type of :data:`DECLINED`."""

    def __repr__(self) -> str:
        return "DECLINED"


DECLINED = Declined()
"""A form declined or cancelled: the agent takes its timeout path."""


def _json_text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


# -- the call ---------------------------------------------------------------------------------


def request_message(
    entry: ToolEntry,
    payload: JsonValue,
    *,
    session_id: str | None,
    request_id: str | int | None,
) -> A2AMessage:
    """The caller's message of the task a call starts (what A2A shows of it): the request
    payload, and the MCP call it came from."""
    mcp: dict[str, JsonValue] = {"tool": entry.name}
    if session_id is not None:
        mcp["session_id"] = session_id
    if request_id is not None:
        mcp["request_id"] = str(request_id)
    return A2AMessage(
        message_id=str(uuid.uuid4()),
        role=A2ARole.USER,
        parts=[A2APart.from_data(payload if payload is not None else {})],
        metadata={"skill": entry.capability.task_name, "mcp": mcp},
    )


def invalid_arguments_result(exc: A2AMappingError) -> types.CallToolResult:
    """The arguments break the tool's ``inputSchema``: nothing was sent."""
    lines = [f"{v['field']}: {v['message']}" for v in exc.violations]
    return types.CallToolResult(
        content=[_text("invalid arguments (nothing was sent): " + "; ".join(lines))],
        is_error=True,
        meta={"disco/violations": list(exc.violations)},
    )


# -- progress ---------------------------------------------------------------------------------


def _parts_text(parts: Sequence[A2APart]) -> str:
    shown: list[str] = []
    for part in parts:
        if part.text is not None:
            shown.append(part.text)
        elif part.kind == "data":
            shown.append(_json_text(part.data))
        else:
            shown.append(f"[file {part.filename or part.url or ''}]".replace(" ]", "]"))
    return "".join(shown) if all(p.text is not None for p in parts) else " ".join(shown)


def progress_text(envelope: Envelope) -> str | None:
    """What a progress notification says of ``envelope`` (None: it is no progress)."""
    if envelope.type == SystemEventType.TASK_STARTED.value:
        return "started"
    if envelope.type == SystemEventType.TASK_PROGRESS.value:
        try:
            progress = TaskProgressData.model_validate(envelope.data)
        except ValidationError:
            return None
        if progress.status is TaskStatus.AWAITING_INPUT:
            return None
        text = progress.message or ""
        if progress.progress is not None:
            text = f"{progress.progress:.0%} {text}".strip()
        return text or None
    if envelope.type == ACTION_PROGRESSED:
        try:
            data = ActionProgressedData.model_validate(envelope.data)
        except ValidationError:
            return None
        if data.message is not None:
            return _parts_text(data.message)
        assert data.artifact is not None
        return _parts_text(data.artifact.parts)
    return None


# -- the answer -------------------------------------------------------------------------------


def _content(parts: Sequence[A2APart], artifact_id: str) -> list[types.ContentBlock]:
    blocks: list[types.ContentBlock] = []
    for index, part in enumerate(parts):
        if part.text is not None:
            blocks.append(_text(part.text))
        elif part.kind == "data":
            blocks.append(_text(_json_text(part.data)))
        elif part.url is not None:
            name = part.filename or part.url.rsplit("/", 1)[-1] or part.url
            blocks.append(
                types.ResourceLink(
                    type="resource_link", uri=part.url, name=name, mime_type=part.media_type
                )
            )
        elif part.raw is not None and (part.media_type or "").startswith("image/"):
            blocks.append(
                types.ImageContent(type="image", data=part.raw, mime_type=part.media_type or "")
            )
        elif part.raw is not None:
            name = part.filename or f"part-{index}"
            blocks.append(
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri=f"disco://artifacts/{artifact_id}/{name}",
                        mime_type=part.media_type,
                        blob=part.raw,
                    ),
                )
            )
    return blocks


class Streamed:
    """The artifacts an agent handed out while it worked (partial answers): it does not
    repeat them in its answer, so the result shows them first."""

    def __init__(self) -> None:
        self._parts: dict[str, list[A2APart]] = {}

    def add(self, envelope: Envelope) -> None:
        """Keep the artifact (or the chunk of one) ``envelope`` carries, if any."""
        if envelope.type != ACTION_PROGRESSED:
            return
        try:
            data = ActionProgressedData.model_validate(envelope.data)
        except ValidationError:
            return
        if data.artifact is None:
            return
        parts = self._parts.setdefault(data.artifact.artifact_id, [])
        if not data.append:
            parts.clear()
        parts.extend(data.artifact.parts)

    def content(self) -> list[types.ContentBlock]:
        blocks: list[types.ContentBlock] = []
        for artifact_id, parts in self._parts.items():
            texts = [part.text for part in parts]
            if all(text is not None for text in texts):  # chunks of one text: one block
                blocks.append(_text("".join(t for t in texts if t is not None)))
            else:
                blocks += _content(parts, artifact_id)
        return blocks


def _of_answer(
    answer: A2AAnswer, entry: ToolEntry | None, task_id: str, streamed: Streamed | None
) -> types.CallToolResult:
    blocks = streamed.content() if streamed is not None else []
    blocks += _content(answer.parts, task_id)
    for artifact in answer.artifacts:
        blocks += _content(artifact.parts, artifact.artifact_id)
    if answer.kind == "message" or answer.state is A2ATaskState.COMPLETED:
        structured = None
        if answer.result is not None:
            structured = entry.structured(answer.result) if entry else {"result": answer.result}
        return types.CallToolResult(content=blocks, structured_content=structured)
    if answer.state is A2ATaskState.INPUT_REQUIRED:
        blocks.append(
            _text(
                f"The agent needs more from you to go on with task {task_id}: send it as an "
                "A2A message to that task (MCP cannot)."
            )
        )
    return types.CallToolResult(content=blocks or [_text(answer.state.value)], is_error=True)


def answer_result(
    envelope: Envelope, entry: ToolEntry | None, task_id: str, streamed: Streamed | None = None
) -> types.CallToolResult:
    """The tool result of the agent's answer (``entry``: the tool, to shape its result;
    ``streamed``: the artifacts it handed out before)."""
    try:
        result = ActionResultData.model_validate(envelope.data)
    except ValidationError as exc:
        return types.CallToolResult(
            content=[
                _text(f"the agent's answer is not a disco result ({exc.error_count()} errors)")
            ],
            is_error=True,
        )
    if result.a2a is not None:
        return _of_answer(result.a2a, entry, task_id, streamed)
    if not result.success:
        error = result.error
        assert error is not None
        text = f"{error.type}: {error.message}" if error.message else error.type
        return types.CallToolResult(
            content=[_text(text)],
            structured_content={"error": error.model_dump(mode="json", exclude_none=True)},
            is_error=True,
        )
    structured = entry.structured(result.result) if entry else {"result": result.result}
    misfit = entry.misfit(structured) if entry else None
    if misfit is not None:
        return types.CallToolResult(
            content=[_text(f"the agent's answer breaks its own answer schema: {misfit}")],
            structured_content=structured,
            is_error=True,
        )
    return types.CallToolResult(
        content=[_text(_json_text(result.result))], structured_content=structured
    )


def timeout_result(
    *, task_id: str, agent: str, seconds: float, public_url: str
) -> types.CallToolResult:
    """No answer within the call's wait: the task goes on, and here is where to follow it."""
    task_url = f"{public_url}/a2a/{agent}/tasks/{task_id}"
    return types.CallToolResult(
        content=[
            _text(
                f"No answer from {agent} within {seconds:g} s. The task goes on: it is task "
                f"{task_id} (A2A: GET {task_url}; the tracker and the console show it too)."
            )
        ],
        structured_content={"status": "working", "task_id": task_id, "a2a_task": task_url},
        is_error=True,
    )


# -- questions to a human ---------------------------------------------------------------------


@dataclass(frozen=True)
class Form:
    """An elicitation form for a question, and how its content becomes the answer.

    Attributes:
        params: the ``elicitation/create`` params.
        choices: what the form offers → the option's value (a choice question).
        whole: the content is the answer (a flat object schema); else its ``answer`` field is.
        answer_schema: the schema the answer must follow, if the question has one.
        json_text: the answer is JSON written as text (a schema a form cannot show).
    """

    params: types.ElicitRequestFormParams
    choices: dict[str, JsonValue] | None = None
    whole: bool = False
    answer_schema: dict[str, Any] | None = None
    json_text: bool = False

    def state(self) -> dict[str, Any]:
        """What to keep of the form to read its answer (on another instance, later)."""
        return {
            "choices": self.choices,
            "whole": self.whole,
            "answer_schema": self.answer_schema,
            "json_text": self.json_text,
        }


def _flat_object(schema: dict[str, Any]) -> bool:
    properties = schema.get("properties")
    return (
        schema.get("type") == "object"
        and isinstance(properties, dict)
        and bool(properties)
        and all(
            isinstance(p, dict) and p.get("type") in _PRIMITIVES and "$ref" not in p
            for p in properties.values()
        )
    )


def elicitation_form(question: HumanInputRequest) -> Form:
    """The form that asks ``question`` (see the module docs)."""
    message = question.question
    one: dict[str, Any] = {"type": "string", "title": "Answer"}
    choices: dict[str, JsonValue] | None = None
    whole = json_text = False
    schema = question.answer_schema
    if question.options:
        # A choice shows its labels (what a person reads) when they tell the options apart,
        # else the options' values (as JSON when they are not text), titled by the labels.
        labels = [option.label for option in question.options]
        if len(set(labels)) == len(labels):
            choices = {option.label: option.value for option in question.options}
        else:
            choices = {
                o.value if isinstance(o.value, str) else _json_text(o.value): o.value
                for o in question.options
            }
        one = {"type": "string", "title": "Answer", "enum": list(choices)}
        if labels != list(choices):
            one["enumNames"] = labels
    elif schema is not None and _flat_object(schema):
        whole = True
    elif schema is not None and schema.get("type") in _PRIMITIVES and "$ref" not in schema:
        one = {**schema, "title": schema.get("title", "Answer")}
    elif schema is not None:
        json_text = True
        one = {
            "type": "string",
            "title": "Answer (JSON)",
            "description": "JSON following " + _json_text(schema)[:1500],
        }
    requested = (
        {key: value for key, value in schema.items() if key != "$schema"}
        if whole and schema is not None
        else {"type": "object", "properties": {ANSWER: one}, "required": [ANSWER]}
    )
    params = types.ElicitRequestFormParams(message=message, requested_schema=requested)
    return Form(params, choices, whole, dict(schema) if schema is not None else None, json_text)


def form_answer(state: dict[str, Any], result: types.ElicitResult) -> JsonValue | Declined:
    """The human's answer in a form's result (``state``: :meth:`Form.state`), or
    :data:`DECLINED` (declined, cancelled, or content that breaks the question)."""
    if result.action != "accept" or result.content is None:
        return DECLINED
    content: dict[str, Any] = dict(result.content)
    answer: Any = content if state.get("whole") else content.get(ANSWER)
    choices = state.get("choices")
    if choices is not None:
        if not isinstance(answer, str) or answer not in choices:
            return DECLINED
        answer = choices[answer]
    elif state.get("json_text"):
        try:
            answer = json.loads(answer) if isinstance(answer, str) else None
        except ValueError:
            return DECLINED
    schema = state.get("answer_schema")
    if answer is None or (schema is not None and not validate_payload(schema, answer).valid):
        return DECLINED
    return answer  # type: ignore[no-any-return]


def question_result(
    envelope: Envelope, *, task_id: str, agent: str, public_url: str
) -> types.CallToolResult:
    """The agent asks a person, and this client cannot show a form: how to answer instead."""
    question = HumanInputRequest.model_validate(envelope.data)
    session_id = envelope.session_id or task_id
    url = f"{public_url}/v1/sessions/{session_id}/answers/{envelope.id}"
    details: dict[str, JsonValue] = {"id": envelope.id, "text": question.question}
    for part in A2AGatewayHelper.question_parts(question):  # its options, schema, timeout
        if isinstance(part.data, dict):
            details.update(part.data)
    offered = ""
    if question.options:
        offered = " (one of: " + ", ".join(_json_text(o.value) for o in question.options) + ")"
    return types.CallToolResult(
        content=[
            _text(
                f"The agent asks a person: {question.question}{offered}. Answer with "
                f'POST {url} {{"answer": ...}} (with your bearer token), or send the answer as '
                f"an A2A message to task {task_id} at {public_url}/a2a/{agent}; the task goes "
                "on once answered."
            )
        ],
        structured_content={
            "status": "input-required",
            "task_id": task_id,
            "question": details,
            "answer": {"method": "POST", "url": url, "body": {"answer": "..."}},
        },
        is_error=True,
    )
