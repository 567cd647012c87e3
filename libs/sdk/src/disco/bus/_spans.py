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
- the tracer's ``span_processor`` gets ``on_start`` and ``on_end`` with one
  :class:`~opentelemetry.sdk.trace.ReadableSpan`, what it gets from a normal span.

So exporters, processors, the sampler and the resource see the same spans as
before. Any other tracer (not the SDK's) is used through the plain API.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
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

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Tracer as SdkTracer

__all__ = ["LightSpan", "LightTracer", "light_tracer"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_DEFAULT = TraceFlags(TraceFlags.DEFAULT)
_RANDOM = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)
_UNSET = Status(StatusCode.UNSET)


def light_tracer(tracer: Tracer) -> LightTracer | None:
    """A :class:`LightTracer` over ``tracer`` when it is the OpenTelemetry SDK's, else None."""
    try:
        from opentelemetry.sdk.trace import Tracer as SdkTracer
    except ImportError:  # pragma: no cover - the SDK is an optional dependency
        return None
    if not isinstance(tracer, SdkTracer):
        return None
    needed = ("sampler", "resource", "span_processor", "id_generator", "instrumentation_info")
    if not all(hasattr(tracer, name) for name in needed):  # pragma: no cover - SDK changed
        return None
    return LightTracer(tracer)


class LightTracer:
    """Starts :class:`LightSpan` s with an SDK tracer's ids, sampler and processors."""

    __slots__ = ("_ids", "_processor", "_random_ids", "_sampler", "_scope", "resource")

    def __init__(self, tracer: SdkTracer) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self._sampler = tracer.sampler
        self.resource = tracer.resource
        self._processor = tracer.span_processor
        self._ids = tracer.id_generator
        info = tracer.instrumentation_info
        self._scope = InstrumentationScope(info.name, info.version, info.schema_url)
        is_random = getattr(self._ids, "is_trace_id_random", None)
        self._random_ids = bool(is_random()) if is_random is not None else False

    def start(
        self,
        name: str,
        kind: SpanKind,
        parent: SpanContext | None,
        context: Context | None,
        attributes: dict[str, types.AnyValue],
    ) -> trace.Span:
        """Start a span, child of ``parent`` (the span context of ``context``: the
        sampler reads the latter; ``None`` for both means the current span)."""
        if parent is None:
            parent = trace.get_current_span(context).get_span_context()
        if parent.is_valid:
            trace_id = parent.trace_id
            random_id = bool(parent.trace_flags & _RANDOM) if _RANDOM else False
        else:
            trace_id = self._ids.generate_trace_id()
            random_id = self._random_ids
        result = self._sampler.should_sample(context, trace_id, name, kind, attributes, ())
        decision = result.decision
        sampled: bool = decision.is_sampled()  # type: ignore[no-untyped-call]
        flags = _SAMPLED if sampled else _DEFAULT
        if random_id:
            flags = TraceFlags(flags | _RANDOM)
        span_context = SpanContext(
            trace_id,
            self._ids.generate_span_id(),
            is_remote=False,
            trace_flags=flags,
            trace_state=result.trace_state,
        )
        if not decision.is_recording():  # type: ignore[no-untyped-call]
            return NonRecordingSpan(span_context)
        parent_or_none = parent if parent.is_valid else None
        extra = result.attributes
        if extra:
            attributes = {**attributes, **extra}
        span = LightSpan(self, name, kind, span_context, parent_or_none, attributes)
        self._processor.on_start(span, context)  # type: ignore[arg-type]
        return span

    def finish(self, span: LightSpan, end_time: int) -> None:
        """Hand an ended span to the processors (as a ``ReadableSpan``)."""
        from opentelemetry.sdk.trace import ReadableSpan

        attributes: types.Attributes = span.attributes
        if span.foreign:
            attributes = BoundedAttributes(attributes=span.attributes, immutable=True)
        self._processor.on_end(
            ReadableSpan(
                name=span.name,
                context=span.context,
                parent=span.parent,
                resource=self.resource,
                attributes=attributes,
                events=tuple(span.events),
                links=tuple(span.links),
                kind=span.kind,
                status=span.status,
                start_time=span.start_time,
                end_time=end_time,
                instrumentation_scope=self._scope,
            )
        )


class LightSpan(trace.Span):
    """A recording span of the bus (see the module doc); the API of any span."""

    __slots__ = (
        "_tracer",
        "attributes",
        "context",
        "end_time",
        "events",
        "foreign",
        "kind",
        "links",
        "name",
        "parent",
        "start_time",
        "status",
    )

    def __init__(
        self,
        tracer: LightTracer,
        name: str,
        kind: SpanKind,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, types.AnyValue],
    ) -> None:
        self._tracer = tracer
        self.name = name
        self.kind = kind
        self.context = context
        self.parent = parent
        self.attributes = attributes
        self.events: list[Any] = []
        self.links: list[Link] = []
        self.status = _UNSET
        self.foreign = False  # attributes set by other code: cleaned at the end
        self.start_time = time.time_ns()
        self.end_time: int | None = None

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            return
        self.end_time = end_time if end_time is not None else time.time_ns()
        self._tracer.finish(self, self.end_time)

    def get_span_context(self) -> SpanContext:
        return self.context

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        if self.end_time is None:
            self.attributes.update(attributes)
            self.foreign = True

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self.end_time is None:
            self.attributes[key] = value
            self.foreign = True

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        from opentelemetry.sdk.trace import Event

        if self.end_time is None:
            self.events.append(
                Event(
                    name,
                    BoundedAttributes(attributes=attributes, immutable=True),
                    timestamp if timestamp is not None else time.time_ns(),
                )
            )

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self.end_time is None and context.is_valid:
            self.links.append(Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.end_time is not None:
            return
        if isinstance(status, Status):
            self.status = status
        else:
            self.status = Status(status, description)

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
