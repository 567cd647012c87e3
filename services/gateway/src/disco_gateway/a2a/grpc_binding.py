"""The A2A gRPC binding: the a2a-sdk's servicer (``lf.a2a.v1.A2AService``) behind disco's door.

Served on ``DISCO_GATEWAY_GRPC_PORT`` when it is set, beside the HTTP bindings,
by the same request handler, task store and push sender: a task sent over gRPC
can be read, streamed or cancelled over JSON-RPC or HTTP+JSON, and back.

One gRPC service serves every agent, so a call names its agent in the request's
``tenant`` field (what each agent card's ``GRPC`` interface sets, and what the
a2a-sdk client copies into every request); an empty ``tenant`` is the gateway's
own endpoint, where a message names its agent in its metadata, as at ``/a2a``.
The caller's disco tenant comes from its token, as on every binding.

Before the a2a-sdk sees a call, the door (:mod:`disco_gateway.a2a.door`) checks
the ``authorization`` metadata, the rate limits and the agent; its refusals are
gRPC statuses with a ``google.rpc.Status`` in ``grpc-status-details-bin``
(``ErrorInfo`` with disco's error code, ``RetryInfo`` on a rate limit).
An ``a2a-version`` other than 1.x is refused with ``UNIMPLEMENTED`` (the A2A
v1.0 mapping of ``VersionNotSupportedError``); none means 1.0 (the service's
own package says it). A call without a token whose ``tenant`` is empty reached
the gateway's own endpoint, which needs one: its ``UNAUTHENTICATED`` says so,
naming the field (a ``BadRequest`` violation of ``tenant``), since the likely
mistake is a client that did not copy the card's ``tenant`` into the request.

The standard health service (``grpc.health.v1.Health``, no token) answers
``SERVING`` for ``""`` and ``lf.a2a.v1.A2AService`` while the instance takes
calls, and ``NOT_SERVING`` from the moment it starts stopping, so a gRPC load
balancer drains it before it goes.

Server reflection (``grpc.reflection.v1alpha``, no token) describes both
services, so ``grpcurl`` or Postman can list and call the binding without the
A2A ``.proto`` at hand: ``grpcurl -plaintext 127.0.0.1:8090 list``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc
import grpc.aio
import structlog
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.types import a2a_pb2_grpc
from a2a.utils.errors import A2AError, InternalError, VersionNotSupportedError
from a2a.utils.grpc_status import status_to_grpc
from google.protobuf import any_pb2, duration_pb2, message
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import propagate
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry, Counter
from starlette.datastructures import Headers

from disco_gateway.a2a.door import admit, authenticate, grpc_status_name, require_token
from disco_gateway.a2a.handler import TARGET_KEY
from disco_gateway.a2a.service import LiveHandler
from disco_gateway.a2a.unavailable import RETRY_AFTER_SECONDS, UNAVAILABLE_REASON, Unavailable
from disco_gateway.scope import enter
from disco_gateway.state import GatewayState
from disco_service import DiscoHTTPError, Unauthenticated

__all__ = ["GatewayGrpcHandler", "GrpcMetrics", "grpc_lifespan"]

_log = structlog.get_logger("disco_gateway.grpc")

Response = TypeVar("Response")

_SERVICE = "lf.a2a.v1.A2AService"
# A method's name by its request's type (and whether it streams): the servicer's
# shared entry points are handed the request, not the method.
_UNARY_METHODS = {
    "SendMessageRequest": "SendMessage",
    "GetTaskRequest": "GetTask",
    "ListTasksRequest": "ListTasks",
    "CancelTaskRequest": "CancelTask",
    "TaskPushNotificationConfig": "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfigRequest": "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigsRequest": "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfigRequest": "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCardRequest": "GetExtendedAgentCard",
}
_STREAM_METHODS = {
    "SendMessageRequest": "SendStreamingMessage",
    "SubscribeToTaskRequest": "SubscribeToTask",
}


class GrpcMetrics:
    """The gRPC binding's calls (on the gateway's ``/metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "disco_gateway_grpc_calls",
            "A2A calls over gRPC by method and status code.",
            ["method", "code"],
            registry=registry,
        )


def _metadata(context: grpc.aio.ServicerContext) -> Headers:
    """The call's text metadata as headers (looked up without regard to case)."""
    raw = [
        (key.encode("latin-1"), value.encode("latin-1"))
        for key, value in context.invocation_metadata() or ()
        if isinstance(value, str)
    ]
    return Headers(raw=raw)


def _peer_host(peer: str) -> str | None:
    """The address of a gRPC peer (``ipv4:127.0.0.1:5555``, ``ipv6:[::1]:5555``)."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6") or not rest:
        return None
    host = rest.rsplit(":", 1)[0]
    return host.strip("[]") or None


def _check_version(headers: Headers) -> None:
    version = headers.get("a2a-version")
    if version and version.split(".")[0] != "1":
        raise VersionNotSupportedError(
            f"A2A version {version!r} is not supported on this binding: it speaks 1.0"
        )


class _NoAgentNamed(Unauthenticated):
    """A call without a token that names no agent (an empty ``tenant``)."""

    field = "tenant"

    def __init__(self) -> None:
        super().__init__(
            "This call names no agent: its `tenant` field is empty, so it reached the "
            "gateway's own endpoint, which needs a bearer token. To call an agent, copy the "
            "`tenant` of the GRPC interface in its card (/a2a/<agent>/.well-known/"
            "agent-card.json) into every request; the a2a-sdk client does it when it is "
            "made from the agent's card."
        )


def _packed(detail: message.Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


async def _abort(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    text: str,
    details: list[message.Message],
) -> None:
    """End the call with ``code`` and a ``google.rpc.Status`` carrying ``details``."""
    status = status_pb2.Status(code=code.value[0], message=text)
    status.details.extend(_packed(detail) for detail in details)
    rich = status_to_grpc(status)
    context.set_trailing_metadata(tuple(rich.trailing_metadata))
    await context.abort(rich.code, rich.details)


async def _refuse(context: grpc.aio.ServicerContext, error: DiscoHTTPError) -> None:
    """End the call with the gRPC status of a door's refusal (as the HTTP bindings
    answer its HTTP status)."""
    code = grpc.StatusCode[grpc_status_name(error.status_code)]
    details: list[message.Message] = [
        error_details_pb2.ErrorInfo(reason=error.code.upper(), domain="disco")
    ]
    retry_after = error.headers.get("Retry-After")
    if retry_after is not None and retry_after.isdigit():
        delay = duration_pb2.Duration(seconds=int(retry_after))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    if isinstance(error, _NoAgentNamed):
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=error.field, description="names the agent to call (empty: none)"
        )
        details.append(error_details_pb2.BadRequest(field_violations=[violation]))
    await _abort(context, code, error.message, details)


async def _unsupported_version(
    context: grpc.aio.ServicerContext, error: VersionNotSupportedError
) -> None:
    """``VersionNotSupportedError`` as A2A v1.0 maps it to gRPC: ``UNIMPLEMENTED`` (the
    a2a-sdk answers ``FAILED_PRECONDITION``), with the ``ErrorInfo`` every client reads."""
    info = error_details_pb2.ErrorInfo(reason="VERSION_NOT_SUPPORTED", domain="a2a-protocol.org")
    await _abort(context, grpc.StatusCode.UNIMPLEMENTED, error.message, [info])


async def _unavailable(context: grpc.aio.ServicerContext, error: Unavailable) -> None:
    """The database or the bus is away for now: ``UNAVAILABLE``, with when to call again."""
    info = error_details_pb2.ErrorInfo(
        reason=UNAVAILABLE_REASON, domain="disco", metadata=error.data or {}
    )
    retry = error_details_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=RETRY_AFTER_SECONDS)
    )
    await _abort(context, grpc.StatusCode.UNAVAILABLE, error.message, [info, retry])


class GatewayGrpcHandler(GrpcHandler):
    """The a2a-sdk's gRPC servicer, each call first admitted by the door.

    The a2a-sdk's servicer builds each call's context in ``_handle_unary`` and
    ``_handle_stream`` (synchronously, from the gRPC context alone); they are
    overridden here so that the door, which is asynchronous and needs the
    request's ``tenant``, runs first and puts the caller's scope in that context.
    """

    def __init__(self, state: GatewayState, metrics: GrpcMetrics) -> None:
        super().__init__(LiveHandler(state))
        self._state = state
        self._metrics = metrics
        self._tracer = state.tracer_provider.get_tracer("disco_gateway.grpc")

    async def _admit(
        self,
        method: str,
        request: message.Message,
        context: grpc.aio.ServicerContext,
        headers: Headers,
    ) -> ServerCallContext:
        _check_version(headers)
        agent = getattr(request, "tenant", "") or None
        if agent is None and not headers.get("authorization"):
            raise _NoAgentNamed
        scope = await authenticate(self._state, agent, headers)
        require_token(scope, method)
        target = await admit(self._state, scope, _peer_host(context.peer()))
        call = self._build_call_context(context, request)
        scope.attach(call)
        if target is not None:
            call.state[TARGET_KEY] = target
        enter(scope)
        return call

    @contextlib.asynccontextmanager
    async def _call(
        self, method: str, request: message.Message, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ServerCallContext]:
        """One call: its server span (continuing the caller's trace from its ``traceparent``
        metadata, so the envelopes it publishes are part of that trace), the door, and
        every failure as a gRPC status; counted by method and status."""
        headers = _metadata(context)
        with self._tracer.start_as_current_span(
            f"{_SERVICE}/{method}",
            context=propagate.extract(headers),
            kind=SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": _SERVICE, "rpc.method": method},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield await self._admit(method, request, context, headers)
            except DiscoHTTPError as exc:
                await _refuse(context, exc)
            except VersionNotSupportedError as exc:
                await _unsupported_version(context, exc)
            except Unavailable as exc:
                await _unavailable(context, exc)
            except A2AError as exc:
                await self.abort_context(exc, context)
            except grpc.aio.AbortError:
                raise
            except Exception:
                _log.exception("grpc call failed", method=method)
                await self.abort_context(InternalError("internal error"), context)
            finally:
                code = context.code() or grpc.StatusCode.OK
                if not isinstance(code, grpc.StatusCode):
                    code = grpc.StatusCode.OK if code == 0 else grpc.StatusCode.UNKNOWN
                span.set_attribute("rpc.grpc.status_code", code.value[0])
                if code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
                    span.set_status(StatusCode.ERROR)
                self._metrics.calls.labels(method, code.name).inc()

    async def _handle_unary(
        self,
        request: message.Message,
        context: grpc.aio.ServicerContext,
        handler_func: Callable[[ServerCallContext], Awaitable[Response]],
        default_response: Response,
    ) -> Response:
        method = _UNARY_METHODS.get(request.DESCRIPTOR.name, request.DESCRIPTOR.name)
        response = default_response  # refused: the status is set, the body unused
        async with self._call(method, request, context) as call:
            response = await handler_func(call)
        return response  # noqa: RET504 - the call context swallows a refusal: then the default

    async def _handle_stream(
        self,
        request: message.Message,
        context: grpc.aio.ServicerContext,
        handler_func: Callable[[ServerCallContext], AsyncIterable[Response]],
    ) -> AsyncIterable[Response]:
        method = _STREAM_METHODS.get(request.DESCRIPTOR.name, request.DESCRIPTOR.name)
        async with self._call(method, request, context) as call:
            async for item in handler_func(call):
                yield item


@contextlib.asynccontextmanager
async def grpc_lifespan(state: GatewayState) -> AsyncIterator[None]:
    """Serve the gRPC binding on ``DISCO_GATEWAY_GRPC_PORT`` (nothing when it is unset);
    stop taking calls when the instance stops, letting running ones end within the
    shutdown grace."""
    settings = state.settings
    port = settings.gateway_grpc_port
    if port is None:
        yield
        return
    limit = settings.max_body_bytes
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.so_reuseport", 0),
        ]
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(  # type: ignore[no-untyped-call]
        GatewayGrpcHandler(state, GrpcMetrics(state.metrics.registry)), server
    )
    checks = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    reflection.enable_server_reflection(
        (_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    address = f"{settings.host}:{port}"
    if server.add_insecure_port(address) == 0:
        raise RuntimeError(f"the gRPC binding cannot listen on {address}")
    started = time.monotonic()
    await server.start()
    for service in ("", _SERVICE):
        await checks.set(service, health_pb2.HealthCheckResponse.SERVING)
    _log.info("grpc binding serving", address=address, seconds=round(time.monotonic() - started, 3))
    try:
        yield
    finally:
        await checks.enter_graceful_shutdown()  # NOT_SERVING: balancers stop sending calls
        await server.stop(settings.shutdown_grace_seconds / 2)
