"""The gRPC binding as a raw gRPC client sees it: the door's refusals as gRPC statuses with
``google.rpc.Status`` details, no stack traces, a task shared with the HTTP bindings, the
caller's trace continued onto the bus, the calls counted, the standard health service and
server reflection.

(The a2a-sdk client runs every binding-parametrized test over gRPC too.)
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf import descriptor_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.e2e.gateway.conftest import TENANT, GatewayProcess, GatewayStack, bearer, token
from tests.e2e.gateway.support import bus_side, metric_value, send_request, until, user_message

Metadata = tuple[tuple[str, str], ...]


def auth(tenant: str = TENANT) -> Metadata:
    return (("authorization", f"Bearer {token(tenant)}"), ("a2a-version", "1.0"))


@pytest.fixture
async def stub(gateway: GatewayProcess) -> AsyncIterator[a2a_pb2_grpc.A2AServiceStub]:
    async with grpc.aio.insecure_channel(gateway.grpc_address) as channel:
        yield a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


def details(error: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, list[tuple[str, str]]]:
    """The status code and the ``(domain, reason)`` of each ``ErrorInfo`` of a failed call."""
    status = status_pb2.Status()
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status.ParseFromString(value)
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append((info.domain, info.reason))
    assert "Traceback" not in (error.details() or "")
    return error.code(), infos


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    return raised.value


async def test_the_door_answers_in_grpc_statuses_with_their_reasons(
    stub: a2a_pb2_grpc.A2AServiceStub,
) -> None:
    message = send_request(user_message({"text": "hi"}))
    message.tenant = "gw-echo"
    no_token = await refused(stub.SendMessage(message, metadata=(("a2a-version", "1.0"),)))
    bad_token = await refused(
        stub.SendMessage(message, metadata=(("authorization", "Bearer nonsense"),))
    )
    not_bearer = await refused(stub.SendMessage(message, metadata=(("authorization", "Basic x"),)))
    nobody = send_request(user_message({"text": "hi"}))
    nobody.tenant = "nobody"
    unknown_agent = await refused(stub.SendMessage(nobody, metadata=auth()))
    missing = await refused(
        stub.GetTask(a2a_pb2.GetTaskRequest(id="missing", tenant="gw-echo"), metadata=auth())
    )
    old_version = await refused(
        stub.SendMessage(
            message, metadata=(("authorization", f"Bearer {token()}"), ("a2a-version", "0.3"))
        )
    )
    too_large = send_request(user_message("x" * 2_000_000))
    too_large.tenant = "gw-echo"
    oversized = await refused(stub.SendMessage(too_large, metadata=auth()))

    for error in (no_token, bad_token, not_bearer):
        assert details(error) == (grpc.StatusCode.UNAUTHENTICATED, [("disco", "UNAUTHENTICATED")])
    assert details(unknown_agent) == (grpc.StatusCode.NOT_FOUND, [("disco", "AGENT_NOT_FOUND")])
    assert details(missing) == (
        grpc.StatusCode.NOT_FOUND,
        [("a2a-protocol.org", "TASK_NOT_FOUND")],
    )
    # A2A v1.0 maps VersionNotSupportedError to UNIMPLEMENTED (the a2a-sdk: FAILED_PRECONDITION).
    assert details(old_version) == (
        grpc.StatusCode.UNIMPLEMENTED,
        [("a2a-protocol.org", "VERSION_NOT_SUPPORTED")],
    )
    assert oversized.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_a_task_sent_over_grpc_is_the_same_task_over_http_and_continues_the_callers_trace(
    gateway: GatewayProcess, gateway_stack: GatewayStack, stub: a2a_pb2_grpc.A2AServiceStub
) -> None:
    trace_id = uuid.uuid4().hex
    traceparent = f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"
    text = uuid.uuid4().hex
    request = send_request(user_message({"text": text}))
    request.tenant = "gw-echo"
    async with bus_side(gateway_stack) as bus:
        sent = await stub.SendMessage(request, metadata=(*auth(), ("traceparent", traceparent)))
        published = await bus.first(
            lambda topic, e: topic == "action-requests" and (e.data or {}).get("text") == text  # type: ignore[union-attr]
        )
    async with httpx.AsyncClient(base_url=gateway.url, headers=bearer()) as http:
        over_http = await http.get(
            f"/a2a/gw-echo/tasks/{sent.task.id}", headers={"A2A-Version": "1.0"}
        )

    assert sent.task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
    assert published.correlation_id == sent.task.id
    assert published.tenant_id == TENANT
    assert published.traceparent is not None
    assert published.traceparent.split("-")[1] == trace_id
    assert over_http.status_code == 200
    assert over_http.json()["id"] == sent.task.id
    assert over_http.json()["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_grpc_calls_are_counted_by_method_and_status(
    gateway: GatewayProcess, stub: a2a_pb2_grpc.A2AServiceStub
) -> None:
    def counted(text: str) -> float:
        series = 'disco_gateway_grpc_calls_total{code="NOT_FOUND",method="GetTask"}'
        return metric_value(text, series, default=0.0)

    async with httpx.AsyncClient(base_url=gateway.url) as http:
        before = counted((await http.get("/metrics")).text)
        missing = a2a_pb2.GetTaskRequest(id="missing", tenant="gw-echo")
        for _ in range(3):
            await refused(stub.GetTask(missing, metadata=auth()))

        async def all_counted() -> float | None:
            # A call is counted as it ends, which may be just after its caller has the status.
            now = counted((await http.get("/metrics")).text)
            return now if now - before >= 3 else None

        after = await until(all_counted, timeout=10, what="three GetTask calls counted")

    assert after - before == 3


async def test_the_standard_health_service_says_the_binding_is_serving(
    gateway: GatewayProcess,
) -> None:
    async with grpc.aio.insecure_channel(gateway.grpc_address) as channel:
        checks = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
        overall = await checks.Check(health_pb2.HealthCheckRequest(service=""))  # no token
        a2a = await checks.Check(health_pb2.HealthCheckRequest(service="lf.a2a.v1.A2AService"))
        unknown = await refused(checks.Check(health_pb2.HealthCheckRequest(service="nope")))

    assert overall.status == health_pb2.HealthCheckResponse.SERVING
    assert a2a.status == health_pb2.HealthCheckResponse.SERVING
    assert unknown.code() == grpc.StatusCode.NOT_FOUND


async def test_server_reflection_describes_the_a2a_service_without_a_token(
    gateway: GatewayProcess,
) -> None:
    """What ``grpcurl list`` and ``grpcurl describe`` ask: the services, then the file
    that defines the A2A service, with its methods."""
    requests = (
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="lf.a2a.v1.A2AService"),
    )
    async with grpc.aio.insecure_channel(gateway.grpc_address) as channel:
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)  # type: ignore[no-untyped-call]
        answers = [answer async for answer in reflect.ServerReflectionInfo(iter(requests))]

    listed = {service.name for service in answers[0].list_services_response.service}
    assert listed == {
        "lf.a2a.v1.A2AService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in answers[1].file_descriptor_response.file_descriptor_proto
    ]
    (a2a_file,) = [file for file in files if file.package == "lf.a2a.v1"]
    (service,) = a2a_file.service
    methods = {method.name for method in service.method}
    assert {"SendMessage", "SendStreamingMessage", "GetTask", "CancelTask"} <= methods
