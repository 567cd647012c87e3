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
    """Attributes ``request`` and ``respond`` take beyond their correlation arguments."""

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
    """Envelope attributes a publishing call may set (all optional)."""

    correlation_id: str | None
    response_event: str | None
    response_topic: str | None


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


class _RandomPool:
    """Random bytes from ``os.urandom``, read ahead; emptied in a forked child (a
    child must never reuse its parent's bytes)."""

    __slots__ = ("at", "pool")

    def __init__(self) -> None:
        self.pool = b""
        self.at = 0

    def take16(self) -> bytearray:
        at = self.at
        if at >= len(self.pool):
            self.pool, at = os.urandom(16 * _POOL_IDS), 0
        self.at = at + 16
        return bytearray(self.pool[at : at + 16])

    def reset(self) -> None:
        self.pool, self.at = b"", 0


_random = _RandomPool()
os.register_at_fork(after_in_child=_random.reset)


def fast_id() -> str:
    """A random (version 4) UUID as text, at a fifth of ``str(uuid.uuid4())``'s cost."""
    raw = _random.take16()
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
