"""Pure ASGI middleware: request context (id, logs, metrics, last-resort 500) and body limit.

Pure ASGI rather than ``BaseHTTPMiddleware``: no extra task per request, the
request body is never buffered, and context variables set here are seen by
the route (and the other way round). One middleware rather than two: each
layer wraps ``receive`` and ``send`` once more, and every response message of
every request passes through each wrapper.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

import structlog
from opentelemetry import trace
from prometheus_client import Counter, Histogram
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from disco_common.errors import ErrorCode
from disco_service._errors import error_response
from disco_service._metrics import ServiceMetrics

__all__ = ["RequestContextMiddleware"]

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_UNMATCHED = "<unmatched>"

log = structlog.get_logger("disco_service.http")
# The request line is built (context, timestamp, trace ids) only when it would be
# written: the standard library logger behind ``log`` decides, and caches the answer.
_log_level = logging.getLogger("disco_service.http")


def _route_template(scope: Scope) -> str:
    # Label by template (/v1/agents/{name}), never by raw path: bounded cardinality.
    route = scope.get("route")
    path_format = getattr(route, "path_format", None)
    return path_format if isinstance(path_format, str) else _UNMATCHED


def _header(scope: Scope, name: bytes) -> bytes:
    # The last value, as dict(headers)[name] gave, without building the dict.
    value = b""
    for key, found in scope.get("headers", ()):
        if key == name:
            value = found
    return bytes(value)


class _BodyTooLarge(HTTPException):
    # An HTTPException so that FastAPI's body reading lets it through unchanged
    # (anything else it turns into a 400); the error handler renders the 413.
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the limit of {limit} bytes.")
        self.details = {"max_bytes": limit}


class _BodyTooSlow(HTTPException):
    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"No part of the request body arrived for {seconds:g} seconds.")
        self.details = {"body_timeout_seconds": seconds}


class RequestContextMiddleware:
    """Gives each HTTP request an id, a log context, metrics, a body limit and a last-resort 500.

    - ``X-Request-ID``: taken from the request when well-formed, else generated;
      echoed on the response and bound to every log line.
    - Trace and span ids of the server span are bound to the log context.
    - Request count and latency by route template and status.
    - Request bodies over ``max_bytes`` are refused (413), and so are bodies
      trickling in too slowly (408): a declared ``Content-Length`` over the
      limit before any body is read; a chunked body (no length) as soon as it
      passes the limit. While the body is being read, each next chunk must
      come within ``read_timeout`` seconds (a slow client holds a worker
      otherwise). Refused bodies are counted and logged like any request.
    - An exception nothing else handled is logged once (with the request id)
      and answered with a 500 in the stable error shape, never with internals.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: ServiceMetrics,
        max_bytes: int,
        read_timeout: float | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout
        # The labelled series by (method, route, status): prometheus-client's
        # labels() takes a lock and checks its arguments on every call.
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def _observe(self, method: str, route: str, status: int, elapsed: float) -> None:
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            series = (
                self.metrics.http_requests.labels(method=method, route=route, status=str(status)),
                self.metrics.http_latency.labels(method=method, route=route),
            )
            self._series[key] = series
        series[0].inc()
        series[1].observe(elapsed)

    def _declared_too_long(self, scope: Scope) -> bool:
        declared = _header(scope, b"content-length")
        if not declared:
            return False
        try:
            return int(declared) > self.max_bytes
        except ValueError:
            return False

    def _limited(self, receive: Receive) -> Receive:
        """``receive``, counting the body against the limit and bounding each chunk's wait."""
        received = 0
        body_done = False

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done or self.read_timeout is None:
                # After the body, receive() waits for the disconnect: no bound on that.
                message = await receive()
            else:
                try:
                    async with asyncio.timeout(self.read_timeout):
                        message = await receive()
                except TimeoutError:
                    raise _BodyTooSlow(self.read_timeout) from None
            if message["type"] == "http.request":
                body_done = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    self.metrics.http_body_rejected.inc()
                    raise _BodyTooLarge(self.max_bytes)
            return message

        return limited_receive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, b"x-request-id").decode("latin-1")
        request_id = incoming if _REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex
        method = scope.get("method", "")
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            structlog.contextvars.bind_contextvars(
                trace_id=f"{span_context.trace_id:032x}", span_id=f"{span_context.span_id:016x}"
            )
        status = 500
        started = False

        async def send_with_context(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        began = time.perf_counter()
        self.metrics.http_in_flight.inc()
        try:
            if self._declared_too_long(scope):
                self.metrics.http_body_rejected.inc()
                await self._refuse(scope, receive, send_with_context)
            else:
                try:
                    await self.app(scope, self._limited(receive), send_with_context)
                except _BodyTooLarge:
                    if started:
                        raise
                    await self._refuse(scope, receive, send_with_context)
        except Exception:
            log.exception("unhandled_error", method=method, path=scope.get("path"))
            if started:
                raise  # The response is half sent: only the server can end it now.
            response = error_response(
                500,
                ErrorCode.INTERNAL.value,
                "Internal error. Quote the request id when reporting it.",
                {"request_id": request_id},
            )
            await response(scope, receive, send_with_context)
        finally:
            elapsed = time.perf_counter() - began
            route = _route_template(scope)
            self.metrics.http_in_flight.dec()
            self._observe(method, route, status, elapsed)
            if _log_level.isEnabledFor(logging.INFO):
                log.info(
                    "request",
                    method=method,
                    route=route,
                    path=scope.get("path"),
                    status=status,
                    duration_ms=round(elapsed * 1000, 2),
                )
            structlog.contextvars.clear_contextvars()

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            ErrorCode.PAYLOAD_TOO_LARGE.value,
            f"The request body is larger than the limit of {self.max_bytes} bytes.",
            {"max_bytes": self.max_bytes},
        )
        await response(scope, receive, send)
