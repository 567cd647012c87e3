"""W3C trace context across Kafka, with the OpenTelemetry API only.

Each publish is a ``PRODUCER`` span (``send <topic>``) whose context is what
the envelope's ``traceparent`` carries; each handler call is a ``CONSUMER``
span (``process <topic>``), child of that ``traceparent``; a requester that
waited for an answer records a ``receive <topic>`` span, child of the answer's.
So one trace runs publisher → consumer → handler → reply → requester.
Attributes follow OpenTelemetry's messaging semantic conventions.

Spans of an OpenTelemetry SDK tracer are recorded through :mod:`disco.bus._spans`
(the same spans, at a fraction of the SDK's per-span cost); attributes are
given when a span starts, never set one by one.

Which tracer provider: the one handed to the :class:`~disco.bus.BusClient`
(services keep one per app), else the global one (``disco.configure_tracing()``
or any OpenTelemetry SDK set up by the application). Without an SDK the API
is a no-op that still passes an incoming ``traceparent`` on, so a trace is
never cut by a disco hop.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import (
    INVALID_SPAN,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)
from opentelemetry.trace.propagation import _SPAN_KEY
from opentelemetry.util import types

if TYPE_CHECKING:
    from contextvars import ContextVar, Token

    from disco.bus._spans import LightSpan, LightTracer, OpenedSpan

from disco._context import maybe_current_context
from disco_common.envelope import Envelope

__all__ = [
    "BusTracer",
    "current_traceparent",
    "span_traceparent",
    "tracing_enabled",
]

_SCOPE = "disco.bus"
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def _runtime_context_var() -> ContextVar[Context] | None:
    """The context variable behind OpenTelemetry's current context, when it is the
    API's default runtime context (``ContextVarsRuntimeContext``), else None."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    if type(runtime) is not ContextVarsRuntimeContext:
        return None
    variable: ContextVar[Context] | None = getattr(runtime, "_current_context", None)
    return variable


_CONTEXT = _runtime_context_var()
"""Read and set directly on the bus's hot paths: ``trace.get_current_span()`` and
``attach(set_span_in_context(...))`` are four and five calls deep around this one
variable (the API picks its runtime context once, at import)."""


def current_span() -> Span:
    """``trace.get_current_span()``: the current span, else ``INVALID_SPAN``."""
    if _CONTEXT is None:
        return trace.get_current_span()
    span = _CONTEXT.get().get(_SPAN_KEY)
    if span is None or not isinstance(span, Span):
        return INVALID_SPAN
    return span


def attach_span(span: Span) -> object:
    """``context.attach(trace.set_span_in_context(span))``; undo with :func:`detach`."""
    if _CONTEXT is None:
        return otel_context.attach(trace.set_span_in_context(span))
    return _CONTEXT.set(Context({**_CONTEXT.get(), _SPAN_KEY: span}))


def detach(token: object) -> None:
    """``context.detach(token)`` for a token of :func:`attach_span`."""
    if _CONTEXT is not None:
        try:
            _CONTEXT.reset(cast("Token[Context]", token))
        except (ValueError, RuntimeError):
            pass  # not this context's token: the API's detach logs it, as it always did
        else:
            return
    otel_context.detach(token)  # type: ignore[arg-type]


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or ``None`` if there is none."""
    if _CONTEXT is not None and _SPAN_KEY not in _CONTEXT.get():
        return None  # no current span (every publish outside a traced call, untraced)
    return span_traceparent(current_span())


def span_traceparent(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span``, or ``None`` if its context is not valid."""
    # What opentelemetry's TraceContext propagator writes, without building a
    # carrier and running every configured propagator for each message.
    # A SpanContext is a tuple: unpacked at once rather than through four properties.
    trace_id, span_id, _, flags, _, valid = span.get_span_context()
    if not valid:
        return None
    # to_bytes().hex(): a third of the cost of format(id, "032x") (measured).
    return (
        f"00-{trace_id.to_bytes(16, 'big').hex()}-"
        f"{span_id.to_bytes(8, 'big').hex()}-{_FLAGS[flags & 0xFF]}"
    )


_FLAGS = [f"{flags:02x}" for flags in range(256)]


def tracing_enabled() -> bool:
    """Whether an OpenTelemetry SDK (any real global tracer provider) is installed."""
    return not isinstance(trace.get_tracer_provider(), _NO_SDK)


_DEFAULT_STATE = trace.DEFAULT_TRACE_STATE
# Enum members read once (each ``SpanKind.X`` is a lookup through the enum's metaclass).
_PRODUCER = SpanKind.PRODUCER
_CONSUMER = SpanKind.CONSUMER


_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A version-00 ``traceparent`` (``int(..., 16)`` alone would take signs, ``_`` and spaces)."""


def _remote(traceparent: str | None, *, checked: bool = False) -> SpanContext | None:
    """The span context a W3C ``traceparent`` names (version 00), else None.

    ``checked``: the text is an envelope's ``traceparent``, which the envelope's
    model validated (lower-case hex in the header's shape): only its version
    and ids are looked at.
    """
    if traceparent is None:
        return None
    if checked:
        if not traceparent.startswith("00-"):
            return None
    elif _TRACEPARENT.fullmatch(traceparent) is None:
        return None
    try:
        trace_id = int(traceparent[3:35], 16)
        span_id = int(traceparent[36:52], 16)
        flags = _TRACE_FLAGS[int(traceparent[53:55], 16)]
    except (ValueError, IndexError):  # an envelope made without validation
        return None
    if trace_id <= 0 or span_id <= 0:
        return None
    return tuple.__new__(SpanContext, (trace_id, span_id, True, flags, _DEFAULT_STATE, True))


_TRACE_FLAGS = [trace.TraceFlags(flags) for flags in range(256)]
_UNSAMPLED_LAST_DIGIT = frozenset("02468ace")
"""The last hex digit of a ``traceparent``'s flags when the sampled bit (0x01) is off."""
_ZERO_TRACE_ID = "0" * 32
_ZERO_SPAN_ID = "-" + "0" * 16 + "-"
"""In a ``traceparent`` of the header's shape, 32 zeros can only be its trace id and a
dash-framed 16 its parent id: looked for in the whole text, without slicing it."""


class UnsampledParent(NonRecordingSpan):
    """The unsampled remote parent of a handler call, current while the handler runs:
    what ``set_span_in_context(NonRecordingSpan(extracted))`` makes of a propagated
    ``traceparent``, with the text parsed only if something asks for its context (a
    span started inside the handler, a publish, a log line's trace ids); most
    handler calls never do.
    """

    __slots__ = ("_traceparent",)

    _context: SpanContext | None = None  # type: ignore[assignment]  # made on demand

    def __init__(self, traceparent: str) -> None:
        # NonRecordingSpan.__init__ only sets the context, made on demand here.
        self._traceparent = traceparent

    def get_span_context(self) -> SpanContext:
        context = self._context
        if context is None:
            context = self._context = (
                _remote(self._traceparent, checked=True) or INVALID_SPAN.get_span_context()
            )
        return context

    def __repr__(self) -> str:
        return f"UnsampledParent({self._traceparent!r})"


def _shared(
    operation: str, name: str, more: dict[str, types.AnyValue]
) -> tuple[str, dict[str, types.AnyValue]]:
    """The name of the ``operation`` spans on broker topic ``name``, and the attributes
    they all share (``more`` added)."""
    return f"{operation} {name}", {
        "messaging.system": "kafka",
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": name,
        **more,
    }


_RECHECK_SECONDS = 1.0
"""How long "no global SDK" is believed before the global provider is looked up again."""


class BusTracer:
    """The spans of one bus client and its consumers.

    Args:
        provider: the tracer provider to record with; ``None`` means the global
            one, looked up while it is still the API's no-op (it may be set later).
    """

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._tracer: Tracer | None = None
        self._light: LightTracer | None = None
        self._recheck_at = 0.0
        # The attributes every span of one topic (and group, partition) shares, made
        # once: a span's own are a copy of these plus its message's (measured: half
        # the cost of building them whole each time).
        # Span names are made once per topic too.
        self._send_attributes: dict[str, tuple[str, dict[str, types.AnyValue]]] = {}
        self._process_attributes: dict[
            tuple[str, str, int], tuple[str, dict[str, types.AnyValue]]
        ] = {}
        if provider is not None and not isinstance(provider, _NO_SDK):
            self._use(provider.get_tracer(_SCOPE))

    def _use(self, tracer: Tracer) -> None:
        self._tracer = tracer
        try:
            from disco.bus._spans import light_tracer
        except ImportError:  # no SDK: whatever tracer it is, through the API
            self._light = None
        else:
            self._light = light_tracer(tracer)

    @property
    def enabled(self) -> bool:
        """Whether spans are recorded (a real provider was given or installed globally)."""
        if self._tracer is not None:
            return True
        # A global provider is set once per process and never unset: remember
        # it; its absence is looked up again at most once a second.
        now = time.monotonic()
        if now < self._recheck_at:
            return False
        if tracing_enabled():
            self._use(trace.get_tracer(_SCOPE))
            return True
        self._recheck_at = now + _RECHECK_SECONDS
        return False

    def _start(
        self,
        name: str,
        kind: SpanKind,
        parent: SpanContext | None,
        attributes: dict[str, types.AnyValue],
        *,
        current: bool = False,
    ) -> Span:
        """A span child of ``parent`` (None: of the current span; ``current``: it is
        the current span's context)."""
        light = self._light
        if light is not None:
            if parent is None:
                parent, current = current_span().get_span_context(), True
            return light.start(name, kind, parent, attributes, current)
        context = None
        if parent is not None and not current:
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        tracer = self._tracer if self._tracer is not None else trace.get_tracer(_SCOPE)
        return tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    def start_send(self, name: str, traceparent: str | None = None) -> Span:
        """Start the ``send`` span of a publish to broker topic ``name``, before its
        envelope is built (so the envelope carries the span's ``traceparent`` from the
        start). Describe it with :meth:`describe_send` once the envelope exists.

        The span is a child of the current span, else of ``traceparent`` (a ready
        envelope's own), else of the handled envelope's (a handler publishing
        without a current span continues the handled envelope's trace).
        """
        parent: SpanContext | None = current_span().get_span_context()
        current = parent is not None and parent.is_valid
        if not current:
            # Both are an envelope's (validated) traceparent.
            if traceparent is None:
                handled = maybe_current_context()
                traceparent = handled.envelope.traceparent if handled is not None else None
            remote = _remote(traceparent, checked=True)
            if remote is not None:
                parent = remote
            else:  # a new trace: the (invalid) current context is the parent
                current = parent is not None
        known = self._send_attributes.get(name)
        if known is None:
            known = self._send_attributes[name] = _shared("send", name, {})
        return self._start(known[0], _PRODUCER, parent, known[1].copy(), current=current)

    def open_send(self) -> OpenedSpan | str | None:
        """Number the ``send`` span of a publish (child of the current span, else of
        the handled envelope's ``traceparent``), to be made by :meth:`send_span` once
        its envelope, which carries that ``traceparent``, is built: the span is made
        once, with all its attributes.

        A ``str`` when the sampler drops the span: the ``traceparent`` its envelope
        carries (sampled flag off), with no span to make or end (most publishes, at a
        production sampling ratio: a new trace decided on its id's bits, or a child of
        an unsampled handler call, made from the incoming text without parsing it).

        None when the span cannot be numbered ahead (an SDK set-up that must see it
        start): use :meth:`start_send` and :meth:`describe_send`.
        """
        light = self._light
        if light is None:
            return None
        # current_span(), inline: most publishes have none.
        span = _CONTEXT.get().get(_SPAN_KEY) if _CONTEXT is not None else current_span()
        parent: SpanContext | None = None
        if span is not None and span is not INVALID_SPAN:
            if type(span) is UnsampledParent:  # inside an unsampled handler call
                dropped = light.dropped_child(span._traceparent)
                if dropped is not None:
                    return dropped
            if isinstance(span, Span):
                parent = span.get_span_context()
        if parent is None or not parent.is_valid:
            handled = maybe_current_context()
            if handled is not None:
                # A handler publishing without a current span continues the handled
                # envelope's trace; else a new trace.
                parent = _remote(handled.envelope.traceparent, checked=True)
        return light.open(parent)

    def send_span(
        self, opened: OpenedSpan, name: str, envelope: Envelope | None, client_id: str
    ) -> Span:
        """The ``send`` span :meth:`open_send` numbered, describing ``envelope`` (None:
        it could not be built)."""
        light = self._light
        assert light is not None  # opened by it
        known = self._send_attributes.get(name)
        if known is None:
            known = self._send_attributes[name] = _shared("send", name, {})
        if envelope is None:
            attributes = known[1].copy()
        else:
            message_id = envelope.id
            attributes = {
                **known[1],
                "messaging.message.id": message_id,
                "messaging.client.id": client_id,
                "messaging.kafka.message.key": (
                    envelope.plan_id or envelope.correlation_id or message_id
                ),
                "cloudevents.event_id": message_id,
                "cloudevents.event_type": envelope.type,
            }
        return light.span(opened, known[0], _PRODUCER, attributes)

    def describe_send(self, span: Span, envelope: Envelope, client_id: str) -> None:
        """Add what the envelope says to its ``send`` span."""
        if self._light is not None:
            # The bus's own span (recording, not ended): known-good values, set as is.
            if span.is_recording():
                attributes = cast("LightSpan", span)._attributes
                message_id = envelope.id
                attributes["messaging.message.id"] = message_id
                attributes["messaging.client.id"] = client_id
                attributes["messaging.kafka.message.key"] = (
                    envelope.plan_id or envelope.correlation_id or message_id
                )
                attributes["cloudevents.event_id"] = message_id
                attributes["cloudevents.event_type"] = envelope.type
            return
        if span.is_recording():
            span.set_attributes(
                {
                    "messaging.message.id": envelope.id,
                    "messaging.client.id": client_id,
                    "messaging.kafka.message.key": envelope.plan_id
                    or envelope.correlation_id
                    or envelope.id,
                    "cloudevents.event_id": envelope.id,
                    "cloudevents.event_type": envelope.type,
                }
            )

    def start_publish(self, name: str, envelope: Envelope, client_id: str) -> tuple[Span, Envelope]:
        """Start the ``send`` span of a ready ``envelope`` to broker topic ``name``.

        The span is a child of the current span (else of the envelope's own
        ``traceparent``); the envelope returned carries the span's
        ``traceparent``, so the consumer's span becomes its child. End the span
        with :meth:`end`.
        """
        span = self.start_send(name, envelope.traceparent)
        self.describe_send(span, envelope, client_id)
        traceparent = span_traceparent(span)
        if traceparent is not None and traceparent != envelope.traceparent:
            envelope = envelope.model_copy(update={"traceparent": traceparent})
        return span, envelope

    @staticmethod
    def end(span: Span, error: BaseException | None = None) -> None:
        """End a span started here, marked as an error when ``error`` is given."""
        if error is not None and span.is_recording():
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()

    def received(self, name: str, envelope: Envelope, client_id: str) -> None:
        """Record that a requester received ``envelope`` (an answer) from topic ``name``.

        A short ``receive`` span, child of the answer's ``traceparent``: the
        last hop of a request/response trace, seen from the requester.
        """
        self._start(
            f"receive {name}",
            SpanKind.CONSUMER,
            _remote(envelope.traceparent, checked=True),
            {
                "messaging.system": "kafka",
                "messaging.operation.type": "receive",
                "messaging.operation.name": "receive",
                "messaging.destination.name": name,
                "messaging.message.id": envelope.id,
                "messaging.message.conversation_id": envelope.correlation_id or "",
                "messaging.client.id": client_id,
                "cloudevents.event_id": envelope.id,
                "cloudevents.event_type": envelope.type,
            },
        ).end()

    def start_process(
        self,
        name: str,
        envelope: Envelope,
        traceparent: str | None,
        *,
        group: str,
        partition: int,
        offset: int,
    ) -> tuple[Span, object]:
        """Start the ``process`` span of one handler call, child of the record's
        ``traceparent``, and make it the current span; undo with :meth:`end_process`.

        The ``traceparent`` header is parsed as the envelope's own (validated) when it
        is the same text, else checked in full.

        An unsampled parent whose children the sampler drops (most traces, at a
        production sampling ratio) gets no span: its own context is made current as
        it came (``traceparent`` unparsed until asked for), so spans started in the
        handler follow its unsampled decision and a publish carries its trace on."""
        light = self._light
        checked = traceparent == envelope.traceparent
        if (
            light is not None
            and light.drops_unsampled
            and traceparent is not None
            and (checked or _TRACEPARENT.fullmatch(traceparent) is not None)
            # a valid, unsampled parent (sampled flag off, version 00, non-zero ids),
            # read from its (validated) text alone
            and traceparent[54] in _UNSAMPLED_LAST_DIGIT
            and traceparent[:3] == "00-"
            and _ZERO_TRACE_ID not in traceparent
            and _ZERO_SPAN_ID not in traceparent
        ):
            unsampled = UnsampledParent(traceparent)
            if _CONTEXT is None:
                return unsampled, attach_span(unsampled)
            # attach_span(unsampled), inline; a handler mostly runs in an empty context.
            base = _CONTEXT.get()
            return unsampled, _CONTEXT.set(
                Context({**base, _SPAN_KEY: unsampled}) if base else Context({_SPAN_KEY: unsampled})
            )
        parent = _remote(traceparent, checked=checked)
        if light is not None and parent is not None:
            # An unsampled trace (most, at a production sampling ratio): the span only
            # carries the trace on; none of what a recorded span is given is needed.
            dropped = light.dropped(parent)
            if dropped is not None:
                return dropped, attach_span(dropped)
        key = (name, group, partition)
        known = self._process_attributes.get(key)
        if known is None:
            known = self._process_attributes[key] = _shared(
                "process",
                name,
                {
                    "messaging.consumer.group.name": group,
                    "messaging.destination.partition.id": str(partition),
                },
            )
        attributes = known[1].copy()
        message_id = envelope.id
        attributes["messaging.kafka.offset"] = offset
        attributes["messaging.message.id"] = message_id
        attributes["cloudevents.event_id"] = message_id
        attributes["cloudevents.event_type"] = envelope.type
        span = self._start(known[0], _CONSUMER, parent, attributes)
        return span, attach_span(span)

    @staticmethod
    def end_process(span: Span, token: object, error: BaseException | None = None) -> None:
        """Detach and end a ``process`` span (recording ``error``, as ``use_span`` does)."""
        if type(span) is UnsampledParent:  # not a span of this handler call: nothing to end
            if _CONTEXT is not None:
                try:
                    _CONTEXT.reset(token)  # type: ignore[arg-type]
                except (ValueError, RuntimeError):
                    pass  # not this context's token: detach() says so
                else:
                    return
            detach(token)
            return
        detach(token)
        BusTracer.end(span, error)

    @contextmanager
    def consume(
        self,
        name: str,
        envelope: Envelope,
        traceparent: str | None,
        *,
        group: str,
        partition: int,
        offset: int,
    ) -> Iterator[Span]:
        """The ``process`` span of one handler call, child of the record's ``traceparent``."""
        span, token = self.start_process(
            name, envelope, traceparent, group=group, partition=partition, offset=offset
        )
        try:
            yield span
        except BaseException as exc:
            self.end_process(span, token, exc)
            raise
        self.end_process(span, token)
