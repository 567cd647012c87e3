"""One trace from a requester through the bus to an agent and back (real broker).

publisher span → ``send`` → ``process`` (the handler) → ``send`` (the reply)
→ ``receive`` at the requester: every hop a child of the one before, one trace id.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from disco import ResultContext, TaskContext, Tool, Worker
from disco.bus import BusClient
from disco.settings import BusSettings
from disco.testing import InMemoryMemory
from disco_common.tasks import ActionResultData


class Pair(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    total: int


def _adder(settings: BusSettings) -> Tool:
    tool = Tool(
        "trace-adder",
        bus_settings=settings,
        register=False,
        validate_requests=False,
        memory=InMemoryMemory(),
    )

    @tool.on_invoke("trace.add.requested")
    async def add(pair: Pair) -> Total:
        return Total(total=pair.a + pair.b)

    return tool


def _in_trace(spans: InMemorySpanExporter, trace_id: int) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]


def _child_of(span: ReadableSpan, parent: ReadableSpan) -> bool:
    return span.parent is not None and span.parent.span_id == parent.context.span_id


def _one(spans: Sequence[ReadableSpan], name: str, parent: ReadableSpan) -> ReadableSpan:
    children = [s for s in spans if s.name == name and _child_of(s, parent)]
    names = sorted((s.name, s.parent.span_id if s.parent else 0) for s in spans)
    assert len(children) == 1, f"no single {name!r} under {parent.name!r}: {names}"
    return children[0]


async def test_a_tool_call_is_one_trace_from_requester_to_handler_and_back(
    spans: InMemorySpanExporter, agent_settings: BusSettings
) -> None:
    prefix = agent_settings.topic_prefix
    tool = _adder(agent_settings)
    async with BusClient(agent_settings, name="trace-requester") as bus:
        await bus.ensure_topics()
        async with tool:
            await tool.wait_ready(30)
            with trace.get_tracer("test").start_as_current_span("requester") as root:
                answer = await bus.request(
                    "trace.add.requested",
                    {"a": 2, "b": 40},
                    response_event="trace.add.done",
                    tenant_id="acme",
                    wait=30,
                )

    assert ActionResultData.model_validate(answer.data).result == {"total": 42}
    trace_id = root.get_span_context().trace_id
    assert answer.traceparent is not None
    assert answer.traceparent.split("-")[1] == f"{trace_id:032x}"
    recorded = _in_trace(spans, trace_id)
    [requester] = [s for s in recorded if s.name == "requester"]
    send = _one(recorded, f"send {prefix}action-requests", requester)
    process = _one(recorded, f"process {prefix}action-requests", send)
    reply = _one(recorded, f"send {prefix}action-results", process)
    receive = _one(recorded, f"receive {prefix}action-results", reply)
    assert (send.kind, process.kind, reply.kind, receive.kind) == (
        SpanKind.PRODUCER,
        SpanKind.CONSUMER,
        SpanKind.PRODUCER,
        SpanKind.CONSUMER,
    )
    assert process.attributes is not None
    assert process.attributes["messaging.system"] == "kafka"
    assert process.attributes["messaging.consumer.group.name"] == "trace-adder"
    assert process.attributes["messaging.destination.name"] == f"{prefix}action-requests"
    assert process.attributes["messaging.operation.type"] == "process"
    assert send.attributes is not None
    assert process.attributes["messaging.message.id"] == send.attributes["messaging.message.id"]


async def test_a_worker_delegation_is_one_trace_through_worker_tool_and_back(
    spans: InMemorySpanExporter, agent_settings: BusSettings
) -> None:
    prefix = agent_settings.topic_prefix
    tool = _adder(agent_settings)
    worker = Worker(
        "trace-worker",
        bus_settings=agent_settings,
        register=False,
        validate_requests=False,
        memory=InMemoryMemory(),
    )

    @worker.on_task("trace.job.requested")
    async def start(task: TaskContext[Pair]) -> None:
        await task.delegate(
            "trace.add.requested", task.input.model_dump(), response_event="trace.job.added"
        )

    @worker.on_result("trace.job.added")
    async def finish(result: ResultContext) -> None:
        task = await result.restore_task()
        await task.complete({"sum": result.result})

    async with BusClient(agent_settings, name="trace-requester") as bus:
        await bus.ensure_topics()
        async with tool, worker:
            await tool.wait_ready(30)
            await worker.wait_ready(30)
            with trace.get_tracer("test").start_as_current_span("requester") as root:
                answer = await bus.request(
                    "trace.job.requested",
                    {"a": 1, "b": 2},
                    response_event="trace.job.done",
                    tenant_id="acme",
                    wait=60,
                )

    assert ActionResultData.model_validate(answer.data).result == {"sum": {"total": 3}}
    recorded = _in_trace(spans, root.get_span_context().trace_id)
    requests, results = f"{prefix}action-requests", f"{prefix}action-results"
    [requester] = [s for s in recorded if s.name == "requester"]
    job = _one(recorded, f"send {requests}", requester)
    at_worker = _one(recorded, f"process {requests}", job)
    delegated = _one(recorded, f"send {requests}", at_worker)
    at_tool = _one(recorded, f"process {requests}", delegated)
    tool_reply = _one(recorded, f"send {results}", at_tool)
    on_result = _one(recorded, f"process {results}", tool_reply)
    completed = _one(recorded, f"send {results}", on_result)
    _one(recorded, f"receive {results}", completed)
    groups = [
        (s.attributes or {}).get("messaging.consumer.group.name")
        for s in (at_worker, at_tool, on_result)
    ]
    assert groups == ["trace-worker", "trace-adder", "trace-worker"]
