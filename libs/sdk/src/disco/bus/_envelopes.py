"""Building the envelopes a :class:`BusClient` publishes: attributes, inheritance, ids."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from pydantic import BaseModel

from disco._context import maybe_current_context
from disco.bus._errors import PublishError
from disco.bus._tracing import current_traceparent
from disco_common.envelope import Envelope, envelope_class_for
from disco_common.topics import Topic

__all__ = [
    "ContextAttributes",
    "EnvelopeAttributes",
    "build_envelope",
    "fast_id",
    "ready_envelope",
    "rejected",
]


class ContextAttributes(TypedDict, total=False):
    """The envelope attributes every publishing call of :class:`BusClient` takes.

    ``request`` and ``respond`` take these besides the correlation arguments they
    name themselves; ``publish``, ``send`` and ``announce`` take all of
    :class:`EnvelopeAttributes`. All are optional: one left out (or ``None``) is
    not set, or, inside a handler, inherited from the envelope being handled
    (tenant, user, session, plan; ``causation_id`` is the handled envelope's id).

    Attributes:
        causation_id: the id of the envelope that caused this one.
        tenant_id: the tenant the event belongs to.
        user_id: the user it acts for.
        session_id: the conversation (session) it belongs to.
        plan_id: the plan it belongs to (also the record key when set).
        task_id: the task it belongs to.
        subject: what the event is about (CloudEvents ``subject``).
        payload_schema: ``name`` or ``name@version`` of the data's schema.
        id: the envelope's id (default: a new UUID); consumers deduplicate on it.
    """

    causation_id: str | None
    tenant_id: str | None
    user_id: str | None
    session_id: str | None
    plan_id: str | None
    task_id: str | None
    subject: str | None
    payload_schema: str | None
    id: str | None


class EnvelopeAttributes(ContextAttributes, total=False):
    """All the envelope attributes ``publish``, ``send`` and ``announce`` take.

    Those of :class:`ContextAttributes`, and:

    Attributes:
        correlation_id: ties a response to its request.
        response_event: the event type the responder must answer with.
        response_topic: where the responder publishes (default ``action-results``).
        time: when the event happened, for an event published after the fact (a
            planner announces its moves once their action is out); naive values
            are taken as UTC; default: now.
    """

    correlation_id: str | None
    response_event: str | None
    response_topic: str | None
    time: datetime | None


_INHERITED = ("tenant_id", "user_id", "session_id", "plan_id")


def build_envelope(
    topic: str | Topic,
    event_type: str,
    data: Any,
    attributes: Mapping[str, Any],
    *,
    source: str,
    traceparent: str | None = None,
) -> Envelope:
    """The envelope for ``topic``, validated, with the handler context inherited.

    Inside a handler, ``causation_id`` is the handled envelope's id and tenant,
    user, session and plan are inherited unless given; the trace is
    ``traceparent`` (the publish span's) if given, else the current span's,
    else the handled envelope's.
    """
    fields: dict[str, Any] = {
        # Given here rather than left to the model's default factories:
        # validation is twice as fast that way (measured).
        "id": fast_id(),
        "time": datetime.now(UTC),
        "source": source,
        "type": event_type,
        "data": data.model_dump(mode="json") if isinstance(data, BaseModel) else data,
    }
    for key, value in attributes.items():
        if value is not None:
            fields[key] = value
    context = maybe_current_context()
    if context is not None:
        cause = context.envelope
        fields.setdefault("causation_id", cause.id)
        for inherited in _INHERITED:
            if inherited not in fields:
                value = getattr(cause, inherited)
                if value is not None:
                    fields[inherited] = value
    if traceparent is None:
        traceparent = current_traceparent()
        if traceparent is None and context is not None:
            traceparent = context.envelope.traceparent
    if traceparent is not None:
        fields["traceparent"] = traceparent
    return envelope_class_for(topic).from_dict(fields)


def ready_envelope(topic: str | Topic, envelope: Envelope, *, retrace: bool = True) -> Envelope:
    """``envelope`` as ``topic``'s envelope kind (checked), with the current trace
    (unless ``retrace`` is False: the publish span sets it)."""
    kind = envelope_class_for(topic)
    if not isinstance(envelope, kind):
        envelope = envelope.as_(kind)
    if not retrace:
        return envelope
    traceparent = current_traceparent()
    if traceparent is not None and traceparent != envelope.traceparent:
        envelope = envelope.model_copy(update={"traceparent": traceparent})
    return envelope


def rejected(name: str, envelope: Envelope, error: BaseException) -> PublishError:
    """The :class:`PublishError` of an envelope the broker did not accept."""
    failure = PublishError(
        f"the broker did not accept the {envelope.type!r} envelope for {name!r}: {error}"
    )
    failure.__cause__ = error
    return failure


_POOL_IDS = 256
"""Ids' worth of random bytes read from the OS at once (one system call per 256 ids)."""

# The UUID variant digit (RFC 9562: bits 10xx) for a random hex digit: 8, 9, a or b.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


class _RandomPool:
    """Random hex text from ``os.urandom``, read ahead (one ``hex()`` per 256 ids);
    emptied in a forked child (a child must never reuse its parent's bytes)."""

    __slots__ = ("at", "text")

    def __init__(self) -> None:
        self.text = ""
        self.at = 0

    def take32(self) -> tuple[str, int]:
        """The pool's text and where 32 unused hex digits start in it."""
        at = self.at
        text = self.text
        if at >= len(text):
            text = self.text = os.urandom(16 * _POOL_IDS).hex()
            at = 0
        self.at = at + 32
        return text, at

    def reset(self) -> None:
        self.text, self.at = "", 0


_random = _RandomPool()
os.register_at_fork(after_in_child=_random.reset)


def fast_id() -> str:
    """A random (version 4) UUID as text, at a fourth of ``str(uuid.uuid4())``'s cost:
    122 random bits, the version digit ``4`` and a variant digit ``8``-``b``."""
    text, at = _random.take32()
    return (
        f"{text[at : at + 8]}-{text[at + 8 : at + 12]}-4{text[at + 13 : at + 16]}-"
        f"{_VARIANT[text[at + 16]]}{text[at + 17 : at + 20]}-{text[at + 20 : at + 32]}"
    )
