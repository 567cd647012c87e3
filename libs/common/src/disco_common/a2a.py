"""A2A v1.0 objects disco exchanges across process boundaries, and the rules that relate them.

The `A2A protocol <https://a2a-protocol.org/v1.0.0/specification/>`_ (package
``lf.a2a.v1``) is how outside systems call disco agents through the gateway.
This module holds, as pydantic models whose JSON is the specification's JSON
(camelCase names, enum values such as ``TASK_STATE_COMPLETED``):

- the objects of the protocol disco reads or writes: :class:`A2AMessage` and
  :class:`A2APart` (text, file as inline bytes or a URL, data), :class:`A2ATask`,
  :class:`A2ATaskStatus`, :class:`A2AArtifact` and the two stream events;
- what an agent answers an A2A caller with: :class:`A2AAnswer` (the ``a2a``
  field of :class:`~disco_common.tasks.ActionResultData`) and the partial
  answers it may send before it (:data:`ACTION_PROGRESSED` envelopes carrying
  :class:`ActionProgressedData`);
- what an agent knows of the A2A message it is answering: :class:`A2AMessageContext`
  (its id, metadata, extensions, referenced tasks, the output modes the caller
  accepts), carried on the request envelope as the :data:`A2A_MESSAGE_ATTRIBUTE`
  CloudEvents extension attribute;
- the state mapping between a disco task (:class:`~disco_common.tasks.TaskStatus`)
  and an A2A task (:class:`A2ATaskState`).

Agent cards (the card objects and the one builder) are in :mod:`disco_common.a2a_cards`.

Readers ignore fields they do not know (the protocol grows); every model
round-trips through the a2a-sdk's own protobuf types (the tests check it).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Literal, Self

from pydantic import (
    Field,
    JsonValue,
    model_validator,
)

from disco_common._base import Wire
from disco_common.ids import UtcDatetime

__all__ = [
    "A2A_MESSAGE_ATTRIBUTE",
    "A2A_PROTOCOL_VERSION",
    "A2A_RESPONSE_EVENT",
    "A2A_TERMINAL_STATES",
    "ACTION_PROGRESSED",
    "A2AAnswer",
    "A2AArtifact",
    "A2AMessage",
    "A2AMessageContext",
    "A2APart",
    "A2ARole",
    "A2ATask",
    "A2ATaskArtifactUpdateEvent",
    "A2ATaskState",
    "A2ATaskStatus",
    "A2ATaskStatusUpdateEvent",
    "ActionProgressedData",
    "a2a_state_for",
    "disco_status_for",
]

A2A_PROTOCOL_VERSION = "1.0"
"""The A2A protocol version disco speaks (the ``A2A-Version`` header, the cards' interfaces)."""

A2A_RESPONSE_EVENT = "a2a.answered"
"""The ``response_event`` of every request the gateway publishes for an A2A caller.

Agents answer with it on ``action-results`` (they answer whatever event the
caller names); the gateway's consumer group picks its answers out of the topic
by the ``ce_type`` header alone, without parsing anyone else's.
"""

ACTION_PROGRESSED = "action.progressed"
"""A partial answer: an envelope of this type on the request's ``response_topic``
with its ``correlation_id``, carrying :class:`ActionProgressedData`.

Sent by a Tool or Worker while it works (an intermediate status message, an
artifact or a chunk of one). It travels on the same topic and key as the final
answer, so a reader sees the partial answers of a request before its answer.
"""


A2A_MESSAGE_ATTRIBUTE = "a2amessage"
"""The CloudEvents extension attribute that carries an :class:`A2AMessageContext`.

Its value is a string, the context's JSON (``{"messageId": ..., "metadata": ...}``),
as CloudEvents extension values are: in structured mode it is a string member of
the envelope, in binary mode the ``ce_a2amessage`` header. A plain Kafka client
parses the string as JSON.
"""


# -- states and roles ------------------------------------------------------------------------


class A2ATaskState(StrEnum):
    """An A2A task's state (its JSON value, as in ``"state": "TASK_STATE_WORKING"``)."""

    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def is_terminal(self) -> bool:
        """Whether nothing happens to the task any more."""
        return self in A2A_TERMINAL_STATES

    @property
    def is_interrupted(self) -> bool:
        """Whether the task waits for the caller (input or authentication)."""
        return self in (A2ATaskState.INPUT_REQUIRED, A2ATaskState.AUTH_REQUIRED)


A2A_TERMINAL_STATES = frozenset(
    {A2ATaskState.COMPLETED, A2ATaskState.FAILED, A2ATaskState.CANCELED, A2ATaskState.REJECTED}
)
"""The states a task never leaves."""


class A2ARole(StrEnum):
    """Who sent a message."""

    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


# disco TaskStatus value -> A2A state. A Worker waiting for its sub-tasks is
# still working from the caller's point of view.
_A2A_STATE_OF: dict[str, A2ATaskState] = {
    "pending": A2ATaskState.SUBMITTED,
    "running": A2ATaskState.WORKING,
    "waiting": A2ATaskState.WORKING,
    "awaiting_input": A2ATaskState.INPUT_REQUIRED,
    "completed": A2ATaskState.COMPLETED,
    "failed": A2ATaskState.FAILED,
}
_DISCO_STATUS_OF: dict[A2ATaskState, str] = {
    A2ATaskState.SUBMITTED: "pending",
    A2ATaskState.WORKING: "running",
    A2ATaskState.INPUT_REQUIRED: "awaiting_input",
    A2ATaskState.AUTH_REQUIRED: "awaiting_input",
    A2ATaskState.COMPLETED: "completed",
    A2ATaskState.FAILED: "failed",
    A2ATaskState.CANCELED: "failed",
    A2ATaskState.REJECTED: "failed",
}


def a2a_state_for(status: str) -> A2ATaskState:
    """The A2A state of a disco task status (a :class:`~disco_common.tasks.TaskStatus`).

    ``pending`` → submitted, ``running``/``waiting`` → working, ``awaiting_input``
    → input-required, ``completed`` → completed, ``failed`` → failed.

    Raises:
        ValueError: ``status`` is not a disco task status.
    """
    try:
        return _A2A_STATE_OF[str(status)]
    except KeyError:
        raise ValueError(
            f"{status!r} is not a disco task status; known: {sorted(_A2A_STATE_OF)}"
        ) from None


def disco_status_for(state: A2ATaskState) -> str:
    """The disco task status (a :class:`~disco_common.tasks.TaskStatus` value) of an A2A state.

    Canceled and rejected tasks are ``failed`` in disco terms (their error says why).
    """
    return _DISCO_STATUS_OF[A2ATaskState(state)]


# -- messages, parts, artifacts, tasks ------------------------------------------------------


class A2APart(Wire):
    """One piece of content: text, a file (inline bytes or a URL) or structured data.

    Exactly one of ``text``, ``raw`` (base64 text of the bytes), ``url`` and
    ``data`` is set. Build one with :meth:`from_text`, :meth:`from_file`,
    :meth:`from_url` or :meth:`from_data`.
    """

    text: str | None = None
    raw: str | None = Field(default=None, description="The file's bytes, base64-encoded.")
    url: str | None = Field(default=None, description="Where the file is.")
    data: JsonValue = Field(default=None, description="Structured data (any JSON value).")
    metadata: dict[str, JsonValue] | None = None
    filename: str | None = None
    media_type: str | None = Field(default=None, description="e.g. `application/pdf`.")

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        kinds = [
            name
            for name, value in (("text", self.text), ("raw", self.raw), ("url", self.url))
            if value is not None
        ]
        if self.data is not None:
            kinds.append("data")
        if len(kinds) != 1:
            raise ValueError(
                "a part carries exactly one of text, raw, url or data; "
                f"this one has {kinds or 'none'}"
            )
        if self.raw is not None:
            try:
                base64.b64decode(self.raw, validate=True)
            except ValueError:
                raise ValueError("raw must be base64-encoded bytes") from None
        return self

    @property
    def kind(self) -> Literal["text", "file", "data"]:
        """What the part carries."""
        if self.text is not None:
            return "text"
        if self.raw is not None or self.url is not None:
            return "file"
        return "data"

    def raw_bytes(self) -> bytes | None:
        """The inline file's bytes (None for other parts)."""
        return base64.b64decode(self.raw) if self.raw is not None else None

    @classmethod
    def from_text(cls, text: str, *, metadata: Mapping[str, JsonValue] | None = None) -> A2APart:
        """A text part."""
        return cls(text=text, metadata=dict(metadata) if metadata else None)

    @classmethod
    def from_data(
        cls, data: JsonValue, *, metadata: Mapping[str, JsonValue] | None = None
    ) -> A2APart:
        """A structured-data part (any JSON value but ``null``)."""
        return cls(data=data, metadata=dict(metadata) if metadata else None)

    @classmethod
    def from_file(
        cls, content: bytes, *, name: str | None = None, media_type: str | None = None
    ) -> A2APart:
        """A file given inline (its bytes travel base64-encoded)."""
        return cls(
            raw=base64.b64encode(content).decode("ascii"), filename=name, media_type=media_type
        )

    @classmethod
    def from_url(
        cls, url: str, *, name: str | None = None, media_type: str | None = None
    ) -> A2APart:
        """A file given by its URL."""
        return cls(url=url, filename=name, media_type=media_type)


class A2AMessage(Wire):
    """One turn of the conversation between a caller (``user``) and an agent."""

    message_id: str = Field(min_length=1)
    role: A2ARole
    parts: list[A2APart] = Field(min_length=1)
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, JsonValue] | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None

    def text(self, separator: str = "\n") -> str:
        """The message's text parts joined (empty when it has none)."""
        return separator.join(part.text for part in self.parts if part.text is not None)


class A2AMessageContext(Wire):
    """The A2A message an agent's request came from, as far as the payload does not say it.

    The gateway puts it on every envelope it makes of an A2A caller's message (the
    request on ``action-requests``, or the human's answer on
    ``notification-events`` when the message answers a question), as the
    :data:`A2A_MESSAGE_ATTRIBUTE` extension attribute. The SDK hands it to a handler
    as ``request.a2a`` (a Tool), ``task.a2a`` (a Worker's task, kept with it),
    ``result.a2a`` (a human's answer) and ``goal.a2a`` (a Planner's goal).

    Attributes:
        message_id: the caller's ``messageId`` (the same when the caller sends the
            message again: the gateway sends it on once).
        metadata: the message's ``metadata``.
        extensions: the extension URIs the message itself names (``extensions``).
        requested_extensions: the extensions the caller activated for the call (its
            ``A2A-Extensions`` service parameter: an HTTP header, gRPC metadata).
        reference_task_ids: other tasks the message refers to (``referenceTaskIds``).
        accepted_output_modes: the media types the caller accepts in the answer
            (``configuration.acceptedOutputModes``; empty: any).
    """

    message_id: str = Field(min_length=1)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    extensions: list[str] = Field(default_factory=list)
    requested_extensions: list[str] = Field(default_factory=list)
    reference_task_ids: list[str] = Field(default_factory=list)
    accepted_output_modes: list[str] = Field(default_factory=list)

    def accepts(self, media_type: str) -> bool:
        """Whether the caller accepts answers of ``media_type`` (any, when it named none).

        ``text/*`` and ``*/*`` in the caller's list match as wildcards.
        """
        if not self.accepted_output_modes:
            return True
        kind = media_type.split(";", 1)[0].strip().lower()
        family = kind.split("/", 1)[0]
        for accepted in self.accepted_output_modes:
            mode = accepted.split(";", 1)[0].strip().lower()
            if mode in (kind, "*/*", f"{family}/*"):
                return True
        return False

    def to_attribute(self) -> str:
        """The value of the :data:`A2A_MESSAGE_ATTRIBUTE` attribute: this context's JSON."""
        return self.model_dump_json(by_alias=True, exclude_defaults=True)

    @classmethod
    def from_attribute(cls, value: object) -> A2AMessageContext:
        """The context an :data:`A2A_MESSAGE_ATTRIBUTE` value carries (its JSON text; an
        object, as a reader may have parsed it already, is taken too).

        Raises:
            ValueError: it is not an A2A message context.
        """
        try:
            if isinstance(value, str | bytes):
                return cls.model_validate_json(value)
            return cls.model_validate(value)
        except ValueError as exc:
            raise ValueError(f"the {A2A_MESSAGE_ATTRIBUTE} attribute is not valid: {exc}") from None

    @classmethod
    def of(cls, attributes: Mapping[str, object]) -> A2AMessageContext | None:
        """The context among an envelope's extension attributes (``envelope.extensions``),
        or None when it carries none, or one that is not valid (its payload still is)."""
        value = attributes.get(A2A_MESSAGE_ATTRIBUTE)
        if value is None:
            return None
        try:
            return cls.from_attribute(value)
        except ValueError:
            return None

    @classmethod
    def of_message(
        cls,
        message: A2AMessage,
        *,
        accepted_output_modes: Iterable[str] = (),
        requested_extensions: Iterable[str] = (),
    ) -> A2AMessageContext:
        """The context of a caller's ``message`` sent with those options."""
        return cls(
            message_id=message.message_id,
            metadata=dict(message.metadata or {}),
            extensions=list(message.extensions or []),
            requested_extensions=sorted(set(requested_extensions)),
            reference_task_ids=list(message.reference_task_ids or []),
            accepted_output_modes=list(accepted_output_modes),
        )


class A2ATaskStatus(Wire):
    """Where a task stands, with the message that explains it (a question, an error)."""

    state: A2ATaskState
    message: A2AMessage | None = None
    timestamp: UtcDatetime | None = None


class A2AArtifact(Wire):
    """Something a task produced: parts with a stable id (chunks extend it by that id)."""

    artifact_id: str = Field(min_length=1)
    parts: list[A2APart] = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    metadata: dict[str, JsonValue] | None = None
    extensions: list[str] | None = None


class A2ATask(Wire):
    """A unit of work an A2A caller follows: its status, history and artifacts."""

    id: str = Field(min_length=1)
    context_id: str = Field(min_length=1)
    status: A2ATaskStatus
    artifacts: list[A2AArtifact] | None = None
    history: list[A2AMessage] | None = None
    metadata: dict[str, JsonValue] | None = None


class A2ATaskStatusUpdateEvent(Wire):
    """A stream event: the task's status changed."""

    task_id: str
    context_id: str
    status: A2ATaskStatus
    metadata: dict[str, JsonValue] | None = None


class A2ATaskArtifactUpdateEvent(Wire):
    """A stream event: an artifact was produced, or a chunk appended to one."""

    task_id: str
    context_id: str
    artifact: A2AArtifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: dict[str, JsonValue] | None = None


# -- what an agent answers an A2A caller with ------------------------------------------------

_ANSWER_STATES = frozenset(
    {
        A2ATaskState.COMPLETED,
        A2ATaskState.CANCELED,
        A2ATaskState.INPUT_REQUIRED,
        A2ATaskState.REJECTED,
        A2ATaskState.FAILED,
        A2ATaskState.AUTH_REQUIRED,
    }
)


class A2AAnswer(Wire):
    """How an agent's answer should look to an A2A caller.

    A Tool returns one (or a Worker completes its task with one) to shape the
    answer; without it the gateway shows the result as a ``completed`` task with
    one data artifact. Build it with :meth:`message`, :meth:`completed`,
    :meth:`input_required`, :meth:`rejected` or :meth:`failed`.

    Attributes:
        kind: ``message`` answers with a direct message (no task is kept);
            ``task`` answers with a task in ``state``.
        state: the task's state after this answer (``task`` only).
        parts: the message: the direct message, or the task's status message
            (the question of ``input-required``, the reason of ``rejected``).
        artifacts: what the task produced (``task`` only).
        result: the answer as plain JSON for disco callers (the ``result`` of the
            :class:`~disco_common.tasks.ActionResultData`); derived from the
            parts when not given.
    """

    kind: Literal["task", "message"] = "task"
    state: A2ATaskState = A2ATaskState.COMPLETED
    parts: list[A2APart] = Field(default_factory=list)
    artifacts: list[A2AArtifact] = Field(default_factory=list)
    result: JsonValue = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.state not in _ANSWER_STATES:
            raise ValueError(
                f"an answer leaves the task {self.state.value}? answers end in one of "
                f"{sorted(s.value for s in _ANSWER_STATES)}"
            )
        if self.kind == "message":
            if not self.parts:
                raise ValueError("a message answer needs at least one part")
            if self.artifacts:
                raise ValueError("a message answer carries no artifacts: answer with a task")
            if self.state is not A2ATaskState.COMPLETED:
                raise ValueError("a message answer has no task state: answer with a task")
        return self

    @property
    def succeeded(self) -> bool:
        """Whether a disco caller should read this answer as a success."""
        return self.state is A2ATaskState.COMPLETED

    def text(self) -> str:
        """The text of the answer's message (empty when it has none)."""
        return "\n".join(part.text for part in self.parts if part.text is not None)

    @classmethod
    def message(cls, *parts: A2APart | str, result: JsonValue = None) -> A2AAnswer:
        """Answer with a direct message instead of a task (strings become text parts)."""
        return cls(kind="message", parts=_parts(parts), result=result)

    @classmethod
    def completed(
        cls,
        *artifacts: A2AArtifact,
        message: Sequence[A2APart | str] = (),
        result: JsonValue = None,
    ) -> A2AAnswer:
        """A completed task with ``artifacts`` (and an optional status message)."""
        return cls(
            state=A2ATaskState.COMPLETED,
            artifacts=list(artifacts),
            parts=_parts(message),
            result=result,
        )

    @classmethod
    def input_required(cls, *question: A2APart | str, result: JsonValue = None) -> A2AAnswer:
        """Ask the caller: the task waits in ``input-required``; its next message continues it."""
        return cls(state=A2ATaskState.INPUT_REQUIRED, parts=_parts(question), result=result)

    @classmethod
    def rejected(cls, reason: str, *parts: A2APart) -> A2AAnswer:
        """Refuse the task (``rejected``), saying why."""
        return cls(state=A2ATaskState.REJECTED, parts=[A2APart.from_text(reason), *parts])

    @classmethod
    def failed(cls, reason: str, *parts: A2APart) -> A2AAnswer:
        """Fail the task (``failed``), saying why."""
        return cls(state=A2ATaskState.FAILED, parts=[A2APart.from_text(reason), *parts])


def _parts(values: Iterable[A2APart | str]) -> list[A2APart]:
    return [A2APart.from_text(value) if isinstance(value, str) else value for value in values]


class ActionProgressedData(Wire):
    """The data of an :data:`ACTION_PROGRESSED` envelope: a partial answer to a request.

    One of ``message`` (an intermediate status update: the task is working)
    and ``artifact`` (an artifact, or a chunk of one when ``append``) is set.

    Attributes:
        sequence: orders the partial answers of one request (1, 2, ...).
        message: the status update's message parts.
        artifact: the artifact or the chunk.
        append: the chunk extends the artifact with the same id.
        last_chunk: the artifact is complete.
    """

    sequence: int = Field(ge=1)
    message: list[A2APart] | None = None
    artifact: A2AArtifact | None = None
    append: bool = False
    last_chunk: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.message is None) == (self.artifact is None):
            raise ValueError("a partial answer carries a status message or an artifact, not both")
        if self.message is not None and not self.message:
            raise ValueError("a status update needs at least one part")
        return self
