"""Light spans: the bus's per-message spans recorded straight into an SDK tracer's pipeline.

An OpenTelemetry SDK span costs about as much CPU as a whole disco publish
(measured: ~20 µs for a bare ``start_span().end()``, ~30 µs with the messaging
attributes, against ~40-60 µs for the publish): its constructor builds bounded
attribute, event and link containers with a lock, cleans every attribute
value, and ``end()`` copies it into a second object for the processors. The
bus starts two spans per message (``send`` and ``process``), with attributes
it builds itself from validated envelopes, so it records them here instead:

- ids, sampling and trace flags come from the SDK tracer's own ``id_generator``
  and ``sampler`` (public attributes of ``opentelemetry.sdk.trace.Tracer``),
  exactly as ``Tracer.start_span`` computes them;
- attributes live in a plain dict (the bus's are known-good strings and ints;
  anything set by other code is cleaned by the SDK's ``BoundedAttributes`` at
  the end, as a normal span would);
- a :class:`LightSpan` is a :class:`~opentelemetry.sdk.trace.ReadableSpan` (as the
  SDK's own span is), handed as is to the tracer's ``span_processor``
  (``on_start``, ``on_end``);
- a static sampler (``ALWAYS_ON``/``ALWAYS_OFF``) is not asked per span: its
  answer never changes;
- a ``BatchSpanProcessor``'s queue takes the spans whose context is sampled (what
  its ``on_end`` checks), directly while it is below one batch, else through its
  own ``emit`` (which wakes its thread and counts drops);
- a publish's span is numbered first (:meth:`LightTracer.open`: ids, sampling
  decision, ``traceparent``, start time) and made once its envelope exists, with
  all its attributes at once;
- span contexts of ids the SDK's ``RandomIdGenerator`` made are built without
  ``SpanContext.__new__``'s range checks (the same tuple).

So exporters, processors, the sampler and the resource see the same spans as
before. This module needs the SDK (``disco-sdk[otel]``): the bus imports it only
for an SDK tracer, and uses any other tracer through the plain API.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Mapping
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.trace import (
    Event,
    ReadableSpan,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
)
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.util import types

_DEFAULT_STATE = trace.DEFAULT_TRACE_STATE

__all__ = ["LightSpan", "LightTracer", "OpenedSpan", "light_tracer"]

_RANDOM: int = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)
_time_ns = time.time_ns
_random_bits = random.getrandbits


def _new_trace_id() -> int:
    """What the SDK's ``RandomIdGenerator.generate_trace_id()`` returns (a non-zero
    128-bit random id), without the generator's method call."""
    trace_id = _random_bits(128)
    while not trace_id:
        trace_id = _random_bits(128)
    return trace_id


def _new_span_id() -> int:
    """``RandomIdGenerator.generate_span_id()``, as :func:`_new_trace_id`."""
    span_id = _random_bits(64)
    while not span_id:
        span_id = _random_bits(64)
    return span_id


_UNSET = Status(StatusCode.UNSET)
# Enum members read once: ``Decision.DROP`` is a class attribute lookup through the
# enum's metaclass each time (measured: ~80 ns, a tenth of a dropped publish's tracing).
_DROP = Decision.DROP
_SAMPLE = Decision.RECORD_AND_SAMPLE
_SAMPLED_FLAG: int = TraceFlags.SAMPLED
# Trace flags by (sampled, random trace id): made once, not per span.
_FLAGS = {
    (sampled, random_id): TraceFlags(
        (TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT) | (_RANDOM if random_id else 0)
    )
    for sampled in (False, True)
    for random_id in (False, True)
}
# The traceparent's flags field, by trace flags.
_FLAG_TEXT = [f"{flags:02x}" for flags in range(256)]
# The flags field of a dropped span's traceparent, by whether its trace id is random.
_DROPPED_TEXT = {random_id: _FLAG_TEXT[_FLAGS[False, random_id]] for random_id in (False, True)}
# The flags field of a dropped child's traceparent, by its parent's flags field (the
# child keeps the parent's random-trace-id flag only, as the SDK's spans do).
_CHILD_FLAG_TEXT = {_FLAG_TEXT[flags]: _DROPPED_TEXT[bool(flags & _RANDOM)] for flags in range(256)}
_NEEDED = ("sampler", "resource", "span_processor", "id_generator", "instrumentation_info")
# Processors (exactly these classes) whose ``on_start`` does nothing: not called per span.
_NO_START: frozenset[type] = frozenset({SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor})
# What a BatchSpanProcessor's batcher (``opentelemetry.sdk._shared_internal.BatchProcessor``)
# must have for its queue to be fed directly (else its processor's ``on_end`` is called).
_BATCH_NEEDED = ("emit", "_queue", "_shutdown", "_max_export_batch_size")
_PARENT_BASED_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def _static_decision(sampler: Any) -> Decision | None:
    """The decision of a static sampler (it never changes), else None."""
    if isinstance(sampler, StaticSampler):
        decision: Decision = sampler.should_sample(None, 1, "").decision
        return decision
    return None


RootDecision = Decision | int
"""A root span's decision: made (a static root sampler), or the bound a root trace id's
low 64 bits must stay under to be sampled (a ``TraceIdRatioBased`` root sampler)."""


ParentBasedDecisions = tuple[RootDecision, Decision, Decision, Decision, Decision]


def _parent_based_decisions(sampler: Any) -> ParentBasedDecisions | None:
    """For a ``ParentBased`` sampler whose delegates for a parent are all static (the
    SDK's default, ``ParentBased(ALWAYS_ON)``, and ``ParentBased(TraceIdRatioBased(r))``,
    what ``parentbased_traceidratio`` and ``DISCO_OTEL_TRACES_SAMPLE_RATIO`` install):
    the root's decision (or its ratio's bound) and the four decisions for a parent
    (remote sampled / not, local sampled / not), which only depend on the parent.
    Else None."""
    if type(sampler) is not ParentBased:
        return None
    root_sampler = getattr(sampler, _PARENT_BASED_DELEGATES[0], None)
    root: RootDecision | None = _static_decision(root_sampler)
    if root is None and type(root_sampler) is TraceIdRatioBased:
        root = root_sampler.bound
    remote_sampled, remote_not, local_sampled, local_not = (
        _static_decision(getattr(sampler, name, None)) for name in _PARENT_BASED_DELEGATES[1:]
    )
    if (
        root is None
        or remote_sampled is None
        or remote_not is None
        or local_sampled is None
        or local_not is None
    ):
        return None
    return (root, remote_sampled, remote_not, local_sampled, local_not)


_TRACE_ID_LIMIT = TraceIdRatioBased.TRACE_ID_LIMIT


def light_tracer(tracer: Tracer) -> LightTracer | None:
    """A :class:`LightTracer` over ``tracer`` when it is the OpenTelemetry SDK's, else None."""
    if not isinstance(tracer, SdkTracer) or not all(hasattr(tracer, n) for n in _NEEDED):
        return None
    return LightTracer(tracer)


def _dropped_traceparent(trace_id: int, random_id: bool) -> str:
    """The ``traceparent`` of a new span the sampler drops: a new span id, sampled off."""
    span_id = _random_bits(64) or _new_span_id()
    return (
        f"00-{trace_id.to_bytes(16, 'big').hex()}-"
        f"{span_id.to_bytes(8, 'big').hex()}-{_DROPPED_TEXT[random_id]}"
    )


class LightTracer:
    """Starts :class:`LightSpan` s with an SDK tracer's ids, sampler and processors."""

    __slots__ = (
        "_ahead",
        "_batches",
        "_ids",
        "_known",
        "_on_end",
        "_parent_based",
        "_processor",
        "_random_ids",
        "_root",
        "_sampler",
        "_scope",
        "_span_class",
        "_start_needed",
        "_static",
        "_trusted_ids",
        "drops_unsampled",
        "resource",
    )

    def __init__(self, tracer: SdkTracer) -> None:
        self._sampler = tracer.sampler
        self.resource = tracer.resource
        self._processor = tracer.span_processor
        self._ids = tracer.id_generator
        info = tracer.instrumentation_info
        self._scope = InstrumentationScope(info.name, info.version, info.schema_url)
        # The SDK's generator never makes an invalid (zero) id: its ids need no check.
        self._trusted_ids = type(self._ids) is RandomIdGenerator
        is_random = getattr(self._ids, "is_trace_id_random", None)
        self._random_ids = bool(is_random()) if is_random is not None else False
        # A static sampler's decision never changes (it passes the parent's trace
        # state on); a ParentBased one over static samplers depends on the parent only.
        self._static = _static_decision(self._sampler)
        self._parent_based = _parent_based_decisions(self._sampler)
        decisions = self._parent_based
        self.drops_unsampled = self._static is _DROP or (
            decisions is not None and decisions[2] is _DROP and decisions[4] is _DROP
        )
        """Whether every child of an unsampled parent (remote or local) is dropped, as
        the sampler would decide without being asked: such a child needs no span of
        its own, its parent's context carries the trace on (see
        :meth:`~disco.bus._tracing.BusTracer.start_process`)."""
        # A new trace's decision without a sampler call: made (static), or the bound
        # its trace id must stay under (a ratio); None: the sampler must be asked.
        self._root: RootDecision | None = (
            self._static
            if self._static is not None
            else decisions[0]
            if decisions is not None
            else None
        )
        self._known: object = None
        self._start_needed = True
        self._on_end: tuple[Any, ...] = ()
        self._batches: tuple[Any, ...] = ()
        # What every span of this tracer shares is its class's: not set per span.
        self._span_class: type[LightSpan] = type(
            "LightSpan",
            (LightSpan,),
            {
                "__module__": __name__,
                "_tracer": self,
                "_resource": self.resource,
                "_instrumentation_scope": self._scope,
            },
        )
        self._plan()

    def _plan(self) -> None:
        """How to hand spans to the processors: a multi-processor's own processors are
        called directly (``on_start`` only if one does something there), and a
        ``BatchSpanProcessor``'s queue is fed directly with the sampled spans (what its
        ``on_end`` does, less its checks of the span's flags: see :meth:`finish`);
        looked at again whenever its processors change (``add_span_processor``)."""
        processor = self._processor
        if isinstance(processor, SynchronousMultiSpanProcessor):
            processors = processor._span_processors
            self._known = processors
            self._start_needed = any(type(p) not in _NO_START for p in processors)
        else:
            processors = (processor,)
            self._known = None
            self._start_needed = True
        # Whether open() may decide and number a span ahead (see there).
        self._ahead = self._root is not None and not self._start_needed and self._trusted_ids
        batches, on_end = [], []
        for each in processors:
            batch = getattr(each, "_batch_processor", None)
            if type(each) is BatchSpanProcessor and all(hasattr(batch, n) for n in _BATCH_NEEDED):
                batches.append(batch)
            else:
                on_end.append(each.on_end)
        self._batches, self._on_end = tuple(batches), tuple(on_end)

    def _decision(self, parent: SpanContext, valid: bool, trace_id: int) -> Decision | None:
        """The sampler's decision for a span of ``trace_id`` when it needs no call, else
        None."""
        if self._static is not None:
            return self._static
        decisions = self._parent_based
        if decisions is None:
            return None
        if not valid:
            root = decisions[0]
            if isinstance(root, Decision):
                return root
            # TraceIdRatioBased.should_sample, without the call and its result object.
            if trace_id & _TRACE_ID_LIMIT < root:
                return _SAMPLE
            return _DROP
        # A SpanContext is a tuple: (trace id, span id, is remote, trace flags, ...).
        sampled = parent[3] & _SAMPLED_FLAG
        if parent[2]:
            return decisions[1] if sampled else decisions[2]
        return decisions[3] if sampled else decisions[4]

    def start(
        self,
        name: str,
        kind: SpanKind,
        parent: SpanContext,
        attributes: dict[str, types.AnyValue],
        current: bool,
    ) -> trace.Span:
        """Start a span, child of ``parent`` (``current``: the current span's context).

        The sampler (unless static) and the processors' ``on_start`` are given
        the parent as a context, as ``Tracer.start_span(context=...)`` gives it
        (none, the current context, when it is the current span).
        """
        processor = self._processor
        if self._known is not None and processor._span_processors is not self._known:
            self._plan()
        # A SpanContext is a tuple: unpacked at once rather than through six properties.
        trace_id, _, _, parent_flags, parent_state, valid = parent
        if valid:
            random_id = bool(parent_flags & _RANDOM)
        elif self._trusted_ids:
            trace_id, random_id = _new_trace_id(), True
        else:
            trace_id = self._ids.generate_trace_id()
            random_id = self._random_ids
        decision = self._static
        if decision is None:
            decision = self._decision(parent, valid, trace_id)
        context: Context | None = None
        if not current and (decision is None or self._start_needed):
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        if decision is None:
            result = self._sampler.should_sample(context, trace_id, name, kind, attributes, ())
            decision, trace_state, extra = result.decision, result.trace_state, result.attributes
            if extra:
                attributes = {**attributes, **extra}
        else:
            trace_state = parent_state if valid else None
        # Decision.is_sampled() / is_recording(), without the calls.
        sampled = decision is _SAMPLE
        flags = _FLAGS[sampled, random_id]
        span_id = _new_span_id() if self._trusted_ids else self._ids.generate_span_id()
        span_context = (
            # SpanContext(...) without its range checks (the ids are the generator's).
            tuple.__new__(
                SpanContext,
                (trace_id, span_id, False, flags, trace_state or _DEFAULT_STATE, True),
            )
            if self._trusted_ids
            else SpanContext(trace_id, span_id, False, flags, trace_state)
        )
        if decision is _DROP:
            return NonRecordingSpan(span_context)
        span = self._span_class(name, kind, span_context, parent if valid else None, attributes)
        if sampled:
            span._sampled = True
        if self._start_needed:
            processor.on_start(span, context)  # type: ignore[arg-type]
        return span

    def dropped(self, parent: SpanContext) -> trace.Span | None:
        """The span :meth:`start` makes for a child of the valid ``parent`` when the
        sampler drops it and says so without a call (a static sampler, or a
        ``ParentBased`` one over static ones for a parent): a non-recording span with
        ids of its own, which carries the trace on unsampled, made without the
        attributes a recorded span needs. None otherwise (use :meth:`start`).

        Only for a valid parent: a new trace's decision may hang on its trace id, which
        :meth:`start` draws itself.
        """
        trace_id, _, _, parent_flags, parent_state, valid = parent
        if not valid or not self._trusted_ids:
            return None
        decision = self._static
        if decision is None:
            decision = self._decision(parent, True, trace_id)
        if decision is not _DROP:
            return None
        context = tuple.__new__(
            SpanContext,
            (
                trace_id,
                _new_span_id(),
                False,
                _FLAGS[False, bool(parent_flags & _RANDOM)],
                parent_state or _DEFAULT_STATE,
                True,
            ),
        )
        return NonRecordingSpan(context)

    def open(self, parent: SpanContext | None) -> OpenedSpan | str | None:
        """The ids of a new span child of ``parent`` (None or not valid: a new trace),
        decided and numbered as :meth:`start` would, for a span whose attributes are
        only known later (a publish's, from the envelope that carries its
        ``traceparent``): nothing is allocated for it but the context.

        A span the sampler drops is not even that: only its ``traceparent`` (a
        ``str``, sampled flag off) is made, what its message carries on; nothing of it
        is recorded (the SDK calls no processor for a dropped span either). A new
        trace under a ratio is decided on its trace id's bits, as
        ``TraceIdRatioBased`` does.

        None when the sampler must be asked, a processor's ``on_start`` called or
        the ids generator is not the SDK's: :meth:`start` then does it all.
        """
        processor = self._processor
        if self._known is not None and processor._span_processors is not self._known:
            self._plan()
        root = self._root
        if not self._ahead or root is None:
            return None
        if parent is None or not parent[5]:  # a new trace
            trace_id = _random_bits(128) or _new_trace_id()
            # TraceIdRatioBased.should_sample, inline.
            if isinstance(root, int):
                decision = _SAMPLE if trace_id & _TRACE_ID_LIMIT < root else _DROP
            else:
                decision = root
            if decision is _DROP:
                return _dropped_traceparent(trace_id, True)
            random_id, trace_state, parent = True, _DEFAULT_STATE, None
        else:
            trace_id, _, _, parent_flags, trace_state, _ = parent
            random_id = bool(parent_flags & _RANDOM)
            decided = self._decision(parent, True, trace_id)
            if decided is None:  # not reached: a root decision implies one for a parent
                return None
            decision = decided
            if decision is _DROP:
                return _dropped_traceparent(trace_id, random_id)
        span_id = _random_bits(64) or _new_span_id()
        flags = _FLAGS[decision is _SAMPLE, random_id]
        context = tuple.__new__(SpanContext, (trace_id, span_id, False, flags, trace_state, True))
        traceparent = (
            f"00-{trace_id.to_bytes(16, 'big').hex()}-"
            f"{span_id.to_bytes(8, 'big').hex()}-{_FLAG_TEXT[flags]}"
        )
        # OpenedSpan(...) without its Python-level __new__.
        return tuple.__new__(OpenedSpan, (context, parent, decision, traceparent, _time_ns()))

    def dropped_child(self, traceparent: str) -> str | None:
        """The ``traceparent`` of a dropped child of the unsampled parent a (validated)
        ``traceparent`` names, made from its text (same trace id, an id of its own,
        sampled flag off), when the sampler drops every child of an unsampled parent
        and the ids are the SDK's; else None."""
        if not self.drops_unsampled or not self._trusted_ids:
            return None
        flags = _CHILD_FLAG_TEXT.get(traceparent[53:55])
        if flags is None:  # not lower-case hex: never from a validated envelope
            return None
        span_id = _random_bits(64) or _new_span_id()
        return f"{traceparent[:36]}{span_id.to_bytes(8, 'big').hex()}-{flags}"

    def span(
        self,
        opened: OpenedSpan,
        name: str,
        kind: SpanKind,
        attributes: dict[str, types.AnyValue],
    ) -> trace.Span:
        """The span :meth:`open` numbered, started when it was opened."""
        context, parent, decision, _, started = opened
        span = self._span_class(name, kind, context, parent, attributes)
        span._start_time = started
        if decision is _SAMPLE:
            span._sampled = True
        return span

    def finish(self, span: LightSpan) -> None:
        """Hand an ended span to the processors.

        A batch processor's queue takes a sampled span directly while it stays
        below one batch (what ``BatchProcessor.emit`` does then, less its fork
        check: the batcher re-initialises itself in a forked child anyway, from
        ``os.register_at_fork``); the span that completes a batch, fills the
        queue or arrives after shutdown goes through ``emit``, which wakes the
        exporting thread, logs and counts drops.
        """
        if span._sampled:
            for batch in self._batches:
                queue = batch._queue
                if len(queue) < batch._max_export_batch_size - 1 and not batch._shutdown:
                    queue.appendleft(span)
                else:
                    batch.emit(span)
        for on_end in self._on_end:
            on_end(span)


class OpenedSpan(NamedTuple):
    """A recorded span numbered by :meth:`LightTracer.open`, not made yet."""

    context: SpanContext
    parent: SpanContext | None
    decision: Decision
    traceparent: str
    """The W3C ``traceparent`` of ``context``."""
    started: int
    """Its start time (ns since the epoch)."""


class LightSpan(trace.Span, ReadableSpan):
    """A recording span of the bus (see the module doc): the API of any span, read
    by processors and exporters as the SDK's own spans are."""

    _attributes: Any
    _events: Any = ()
    _links: Any = ()
    _status = _UNSET
    _instrumentation_info = None
    _end_time: int | None = None
    _foreign = False
    """Attributes set by other code: cleaned at the end."""
    _sampled = False
    """Set by the tracer: whether batch processors export it."""

    _tracer: LightTracer
    """The tracer, resource and scope are those of the class each tracer makes."""

    def __init__(
        self,
        name: str,
        kind: SpanKind,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, types.AnyValue],
    ) -> None:
        # ReadableSpan's fields, set here rather than through its constructor
        # (those every new span has alike are the class's, until one is set).
        self._name = name
        self._kind = kind
        self._context = context
        self._parent = parent
        self._attributes = attributes
        self._start_time = _time_ns()

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            return
        self._end_time = end_time if end_time is not None else _time_ns()
        if self._foreign:
            self._attributes = BoundedAttributes(attributes=self._attributes, immutable=True)
        self._tracer.finish(self)

    def get_span_context(self) -> SpanContext:
        return self._context  # type: ignore[return-value]  # always set here

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        if self._end_time is None:
            self._attributes.update(attributes)
            self._foreign = True

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self._end_time is None:
            self._attributes[key] = value
            self._foreign = True

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        if self._end_time is None:
            event = Event(
                name,
                BoundedAttributes(attributes=attributes, immutable=True),
                timestamp if timestamp is not None else time.time_ns(),
            )
            self._events = (*self._events, event)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self._end_time is None and context.is_valid:
            self._links = (*self._links, Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self._end_time is not None:
            return
        self._status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        kind = type(exception)
        module = kind.__module__
        described: dict[str, types.AnyValue] = {
            "exception.type": (
                f"{module}.{kind.__qualname__}"
                if module and module != "builtins"
                else kind.__qualname__
            ),
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        if attributes:
            described.update(attributes)
        self.add_event("exception", described, timestamp)
