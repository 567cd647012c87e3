"""Benchmark: the A2A gateway beside the SDK's own request/response, on one stack.

    uv run python bench/gateway.py [--round-trips 300] [--seconds 10] [--clients 50]

Starts an embedded PostgreSQL and Tansu broker on free loopback ports unless
``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP`` name existing ones (a
fresh database, migrated), then runs as real processes: the registry, the
``hello`` example tool (``--tools`` processes) and one gateway. From this process:

- the SDK path: ``BusClient.request(..., wait=...)`` to the hello tool, one at a
  time (p50/p99);
- A2A ``SendMessage`` (blocking) to ``/a2a/hello`` over JSON-RPC, over
  HTTP+JSON and over gRPC (a raw ``grpc.aio`` stub), one at a time (p50/p99),
  and what A2A adds to the SDK path at p50 (the paths take turns call by call,
  so that the load on the machine weighs on them alike);
- MCP ``tools/call`` of ``hello__hello`` at ``/mcp``, in the same turns: stateless
  2026-07-28 (one POST, a JSON answer) and in a 2025-11-25 session (the answer on
  the POST's event stream), and what MCP adds to the SDK path at p50;
- MCP ``tools/list`` with ``--agents`` (1,000) more agents registered: the first
  listing (read from the registry), then a page (p50/p99) and every page;
- streaming first-event latency: ``SendStreamingMessage`` (HTTP+JSON SSE), time
  to the first event and to the last (p50/p99);
- tasks/s: blocking ``SendMessage`` from ``--clients`` concurrent clients for
  ``--seconds``, with the CPU each part of the stack (gateway, tool, PostgreSQL,
  the embedded broker, this client) spent per task, as measured and less what it
  spends idle (its CPU over a few idle seconds before the run,
  at the same rate): on a busy machine, few tasks complete and the idle share
  of each would hide what a task costs.

Profiling the gateway: ``BENCH_PROFILE_GATEWAY=<file.prof>`` runs it under cProfile
(with ``BENCH_PROFILE_WINDOW=1``, only during the concurrent run);
``BENCH_PYSPY_GATEWAY=<file>`` samples the concurrent run with ``py-spy`` (on PATH).

The load generator is a lean HTTP/1.1 client (``bench/_common.py``): it shares
the machine's cores with the gateway, PostgreSQL, the broker and the tool.
Targets (issue 10): A2A adds <= 3 ms p50 over the SDK path; >= 1,000 tasks/s.
Issue 38: MCP adds no more than A2A adds; ``tools/list`` with 1,000 agents < 50 ms p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc
import grpc.aio
import httpx
from _common import (
    Infra,
    LeanHttp,
    children,
    cpu_seconds,
    percentile,
    scratch_infra,
    stop_processes,
    wait_ready,
)
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf.json_format import ParseDict

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role

TENANT = "bench"
IDLE_SECONDS = 3.0
"""How long the idle CPU of the stack is measured, before the concurrent run."""
ROOT = Path(__file__).resolve().parents[1]


def _message() -> dict[str, object]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"name": "Ada"}}],
    }


def _jsonrpc_body() -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": _message()}}
    ).encode()


def _rest_body() -> bytes:
    return json.dumps({"message": _message()}).encode()


def _grpc_request() -> a2a_pb2.SendMessageRequest:
    request = ParseDict({"message": _message()}, a2a_pb2.SendMessageRequest())
    request.tenant = "hello"  # the agent, as its card's GRPC interface says
    return request


def _completed(content: bytes, jsonrpc: bool) -> bool:
    body = json.loads(content)
    task = body["result"]["task"] if jsonrpc else body["task"]
    return bool(task["status"]["state"] == "TASK_STATE_COMPLETED")


MODERN = "2026-07-28"


def _mcp_body(method: str, params: dict[str, object], request_id: int, *, modern: bool) -> bytes:
    if modern:
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        }
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(body).encode()


def _mcp_result(content: bytes) -> dict[str, object]:
    """The JSON-RPC result of a response: a JSON body, or the last event of a stream."""
    text = content.decode()
    if not text.lstrip().startswith("{"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    result: dict[str, object] = json.loads(text)["result"]
    return result


def _mcp_headers(token: str, method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


async def _sampler(pid: int, seconds: float) -> asyncio.subprocess.Process | None:
    """py-spy sampling ``pid`` for ``seconds`` when ``BENCH_PYSPY_GATEWAY`` names an output
    (folded stacks; ``BENCH_PYSPY_FLAGS``, default ``--nonblocking``, e.g. ``--native``)."""
    output = os.environ.get("BENCH_PYSPY_GATEWAY")
    if not output:
        return None
    flags = os.environ.get("BENCH_PYSPY_FLAGS", "--nonblocking").split()
    command = ["record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "250"]
    return await asyncio.create_subprocess_exec(
        "py-spy", *command, *flags, "--format", "raw", "--output", output,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _line(label: str, samples: list[float], extra: str = "") -> None:
    print(
        f"{label:<44} p50 {percentile(samples, 0.5) * 1000:7.2f} ms  "
        f"p99 {percentile(samples, 0.99) * 1000:7.2f} ms  ({len(samples)} calls){extra}"
    )


async def sequential(count: int, call: object) -> list[float]:
    samples: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        await call()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return samples


async def bench(args: argparse.Namespace, infra: Infra) -> None:
    database_url, bootstrap = infra.database_url, infra.bootstrap
    postmaster, broker = infra.postmaster_pid, infra.broker_pid
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    registry_port, gateway_port, grpc_port = free_port(), free_port(), free_port()
    registry_url = f"http://127.0.0.1:{registry_port}"
    gateway_url = f"http://127.0.0.1:{gateway_port}"
    env = {
        **os.environ,
        "DISCO_DATABASE_URL": database_url,
        "DISCO_KAFKA_BOOTSTRAP": bootstrap,
        "DISCO_TOPIC_PREFIX": prefix,
        "DISCO_KAFKA_PARTITIONS": "8",
        "DISCO_KAFKA_SESSION_TIMEOUT_MS": "2000",
        "DISCO_KAFKA_HEARTBEAT_INTERVAL_MS": "500",
        "DISCO_LOG_LEVEL": "WARNING",
        "DISCO_REGISTRY_URL": registry_url,
        "DISCO_TENANT_ID": TENANT,
        # One pooled connection per concurrent client, as the other benches do: at 20,
        # 50 clients overflowed the pool and py-spy showed 6% of the gateway's samples
        # opening (and closing) overflow connections.
        "DISCO_DATABASE_POOL_SIZE": str(max(20, args.clients)),
        "DISCO_REGISTRY_PORT": str(registry_port),
        "DISCO_GATEWAY_PORT": str(gateway_port),
        "DISCO_GATEWAY_PUBLIC_URL": gateway_url,
        "DISCO_GATEWAY_GRPC_PORT": str(grpc_port),
        "PYTHONPATH": str(ROOT),
    }
    logs = Path(tempfile.mkdtemp(prefix="disco-bench-gateway-"))
    processes: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = (logs / f"{name}.log").open("wb")
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=log)
        processes[name] = process
        return process

    settings = BusSettings(kafka_bootstrap=bootstrap, topic_prefix=prefix, kafka_partitions=8)
    try:
        async with BusClient(settings, name="bench") as bus:
            await bus.ensure_topics()
            registry = spawn("registry", [sys.executable, "-m", "disco_registry"])
            await wait_ready("registry", registry_url, registry, limit_seconds=90)
            for index in range(args.tools):
                spawn(f"hello-{index}", [sys.executable, "examples/hello_tool.py"])
            profile = os.environ.get("BENCH_PROFILE_GATEWAY")  # a cProfile output path
            runner = [str(ROOT / "bench" / "_profiled.py"), profile] if profile else ["-m"]
            gateway = spawn("gateway", [sys.executable, *runner, "disco_gateway"])
            await wait_ready("gateway", gateway_url, gateway, limit_seconds=90)
            print(f"gateway pid {gateway.pid}, logs in {logs}", flush=True)
            token = mint_dev_token(DEV_AUTH_SECRET, TENANT, "bench", (Role.USER,), 3600)
            headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}

            # Warm up: the tool has registered and joined its group, caches are filled.
            async with httpx.AsyncClient(base_url=gateway_url, headers=headers, timeout=60) as http:
                deadline = time.monotonic() + 90
                while True:
                    response = await http.post("/a2a/hello/message:send", content=_rest_body())
                    if response.status_code == 200 and _completed(response.content, False):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the hello tool never answered: {response.text}")
                    await asyncio.sleep(0.5)

            async def sdk_call() -> None:
                await bus.request(
                    "hello.requested",
                    {"name": "Ada"},
                    response_event="hello.done",
                    wait=30,
                    tenant_id=TENANT,
                    user_id="bench",
                )

            lean = LeanHttp([gateway_url], headers, connections=args.clients)

            async def jsonrpc_call() -> None:
                response = await lean.request("POST", "/a2a/hello", _jsonrpc_body())
                assert _completed(response.content, True), response.text

            async def rest_call() -> None:
                response = await lean.request("POST", "/a2a/hello/message:send", _rest_body())
                assert _completed(response.content, False), response.text

            channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            grpc_metadata = (("authorization", headers["Authorization"]), ("a2a-version", "1.0"))

            async def grpc_call() -> None:
                response = await stub.SendMessage(_grpc_request(), metadata=grpc_metadata)
                assert response.task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED

            mcp = LeanHttp([gateway_url], _mcp_headers(token, "tools/call", "hello__hello"), 1)
            ids = iter(range(1, 10**9))

            async def mcp_call() -> None:
                body = _mcp_body(
                    "tools/call",
                    {"name": "hello__hello", "arguments": {"name": "Ada"}},
                    next(ids),
                    modern=True,
                )
                response = await mcp.request("POST", "/mcp", body)
                result = _mcp_result(response.content)
                assert result["structuredContent"] == {"message": "Hello, Ada!"}, response.text

            async with httpx.AsyncClient(base_url=gateway_url, timeout=60) as http:
                opened = await http.post(
                    "/mcp",
                    content=json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": 0,
                            "method": "initialize",
                            "params": {
                                "protocolVersion": "2025-11-25",
                                "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"},
                            },
                        }
                    ),
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Accept": "application/json, text/event-stream",
                        "Content-Type": "application/json",
                    },
                )
                session_headers = {
                    "Authorization": f"Bearer {token}",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2025-11-25",
                    "Mcp-Session-Id": opened.headers["mcp-session-id"],
                }
            session = LeanHttp([gateway_url], session_headers, 1)

            async def mcp_session_call() -> None:
                body = _mcp_body(
                    "tools/call",
                    {"name": "hello__hello", "arguments": {"name": "Ada"}},
                    next(ids),
                    modern=False,
                )
                response = await session.request("POST", "/mcp", body)
                result = _mcp_result(response.content)
                assert result["structuredContent"] == {"message": "Hello, Ada!"}, response.text

            paths = (sdk_call, jsonrpc_call, rest_call, grpc_call, mcp_call, mcp_session_call)
            for call in paths:  # warm each path
                await sequential(20, call)
            print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
            print(f"one request at a time, {args.round_trips} each, the six paths taking turns:")
            # Call by call in turn rather than path after path: a change of load on the
            # machine during the run weighs on them alike, and none runs right after
            # the warm-up.
            taken: tuple[list[float], ...] = tuple([] for _ in paths)
            for _ in range(args.round_trips):
                for call, samples in zip(paths, taken, strict=True):
                    taken_at = time.perf_counter()
                    await call()
                    samples.append(time.perf_counter() - taken_at)
            sdk, jsonrpc, rest, over_grpc, over_mcp, mcp_session = taken
            await channel.close()
            await mcp.close()
            await session.close()
            _line("SDK request(wait=) to the hello tool", sdk)
            for label, samples, door in (
                ("A2A SendMessage, JSON-RPC", jsonrpc, "A2A"),
                ("A2A SendMessage, HTTP+JSON", rest, "A2A"),
                ("A2A SendMessage, gRPC", over_grpc, "A2A"),
                ("MCP tools/call, 2026-07-28", over_mcp, "MCP"),
                ("MCP tools/call, 2025-11-25 session", mcp_session, "MCP"),
            ):
                added = (percentile(samples, 0.5) - percentile(sdk, 0.5)) * 1000
                _line(label, samples, f"  {door} adds {added:+.2f} ms at p50")

            first_events: list[float] = []
            whole: list[float] = []
            async with httpx.AsyncClient(base_url=gateway_url, headers=headers, timeout=60) as http:
                for _ in range(max(args.round_trips // 3, 20)):
                    started = time.perf_counter()
                    async with http.stream(
                        "POST", "/a2a/hello/message:stream", content=_rest_body()
                    ) as stream:
                        first = None
                        async for line in stream.aiter_lines():
                            if line.startswith("data:") and first is None:
                                first = time.perf_counter() - started
                    first_events.append(first or 0.0)
                    whole.append(time.perf_counter() - started)
            _line("A2A SendStreamingMessage: first event", first_events)
            _line("A2A SendStreamingMessage: whole stream", whole)

            pids = {
                "gateway": [gateway.pid],
                "tool": [p.pid for n, p in processes.items() if n.startswith("hello")],
            }

            def cpu() -> dict[str, float]:
                sample = {name: sum(map(cpu_seconds, group)) for name, group in pids.items()}
                if postmaster is not None:
                    sample["postgres"] = sum(map(cpu_seconds, [postmaster, *children(postmaster)]))
                if broker is not None:
                    sample["broker"] = cpu_seconds(broker)
                sample["client"] = time.process_time()
                return sample

            completed = errors = 0
            latencies: list[float] = []
            deadline = time.perf_counter() + args.seconds

            async def client_loop() -> None:
                nonlocal completed, errors
                while time.perf_counter() < deadline:
                    started = time.perf_counter()
                    response = await lean.request("POST", "/a2a/hello/message:send", _rest_body())
                    if response.status_code == 200 and _completed(response.content, False):
                        completed += 1
                        latencies.append(time.perf_counter() - started)
                    else:
                        errors += 1

            # Warm up at full concurrency first: the database pool and the HTTP connections
            # open now, not inside the measured window (where they cost each run differently).
            for _ in range(3):
                await asyncio.gather(*(rest_call() for _ in range(args.clients)))
            # What the stack spends idle (fetch polls, heartbeats): on a busy machine the
            # run completes few tasks, and this share of each would hide what a task costs.
            idle_from, idle_started = cpu(), time.perf_counter()
            await asyncio.sleep(IDLE_SECONDS)
            idle_to, idle_elapsed = cpu(), time.perf_counter() - idle_started
            deadline = time.perf_counter() + args.seconds
            if profile and os.environ.get("BENCH_PROFILE_WINDOW") == "1":
                gateway.send_signal(signal.SIGUSR1)  # bench/_profiled.py: this run only
            sampler = await _sampler(gateway.pid, args.seconds)
            before = cpu()
            started = time.perf_counter()
            await asyncio.gather(*(client_loop() for _ in range(args.clients)))
            elapsed = time.perf_counter() - started
            after = cpu()
            if profile and os.environ.get("BENCH_PROFILE_WINDOW") == "1":
                gateway.send_signal(signal.SIGUSR2)
            if sampler is not None:
                await sampler.wait()
            tasks = max(completed, 1)
            per_task = ", ".join(
                f"{name} {(after[name] - before[name]) / tasks * 1000:.2f}" for name in after
            )
            idle_rate = {name: (idle_to[name] - idle_from[name]) / idle_elapsed for name in idle_to}
            busy = {
                name: after[name] - before[name] - idle_rate[name] * elapsed
                for name in after
                if name != "client"
            }
            busy_per_task = ", ".join(
                f"{name} {spent / tasks * 1000:.2f}" for name, spent in busy.items()
            )
            print(
                f"{args.clients} concurrent clients, {args.seconds:.0f} s: "
                f"{completed / elapsed:,.0f} tasks/s ({completed:,} completed, {errors} errors), "
                f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 "
                f"{percentile(latencies, 0.99) * 1000:.1f} ms"
            )
            print(f"CPU ms per task: {per_task}")
            print(f"CPU ms per task, less what the stack spends idle: {busy_per_task}")
            print(f"load average after: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
            await lean.close()
            await tools_list(args, registry_url, gateway_url, token)
    finally:
        stop_processes(list(processes.values()))


def _agent(index: int) -> dict[str, object]:
    """A registration of an agent with one skill (as the registry bench's, with schemas)."""
    name = f"bench-agent-{index:04d}"
    return {
        "agent_id": name,
        "name": name,
        "version": "1.0.0",
        "description": f"agent {index} of the bench",
        "instance_id": f"host-{index}:1",
        "ttl_seconds": 3600,
        "capabilities": [
            {
                "task_name": f"task-{index:04d}",
                "description": f"does task {index}",
                "consumed_event": {
                    "event_type": f"task-{index:04d}.requested",
                    "topic": "action-requests",
                    "json_schema": {
                        "type": "object",
                        "properties": {"text": {"type": "string"}, "n": {"type": "integer"}},
                        "required": ["text"],
                    },
                },
                "produced_events": [
                    {
                        "event_type": f"task-{index:04d}.completed",
                        "topic": "action-results",
                        "json_schema": {
                            "type": "object",
                            "properties": {"result": {"type": "object"}},
                        },
                    }
                ],
            }
        ],
    }


async def tools_list(
    args: argparse.Namespace, registry_url: str, gateway_url: str, token: str
) -> None:
    """``tools/list`` with ``args.agents`` more agents registered (one skill each)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=registry_url, headers=headers, timeout=60) as http:
        pending = iter(range(args.agents))

        async def register() -> None:
            for index in pending:
                response = await http.post("/v1/agents", json=_agent(index))
                response.raise_for_status()

        await asyncio.gather(*(register() for _ in range(8)))
    # The gateway hears of them (agent.registered) and reads its listings afresh.
    lister = LeanHttp([gateway_url], _mcp_headers(token, "tools/list"), 1)

    async def listing(cursor: str | None = None) -> dict[str, object]:
        params: dict[str, object] = {} if cursor is None else {"cursor": cursor}
        response = await lister.request(
            "POST", "/mcp", _mcp_body("tools/list", params, 1, modern=True)
        )
        return _mcp_result(response.content)

    await asyncio.sleep(2)  # past the changes' settling (half a second after the last)
    started = time.perf_counter()
    first = await listing()
    cold = time.perf_counter() - started

    async def walk() -> int:
        count, cursor = 0, None
        while True:
            page = await listing(cursor)
            count += len(page["tools"])  # type: ignore[arg-type]
            cursor = page.get("nextCursor")  # type: ignore[assignment]
            if cursor is None:
                return count

    tools = await walk()
    pages = await sequential(args.round_trips, listing)
    walks = await sequential(max(args.round_trips // 10, 10), walk)
    print(
        f"MCP tools/list with {args.agents:,} more agents ({tools:,} tools, "
        f"{len(first['tools']):,} a page): the first listing {cold * 1000:.1f} ms"  # type: ignore[arg-type]
    )
    _line("MCP tools/list, one page", pages)
    _line(f"MCP tools/list, every page ({tools // max(len(first['tools']), 1) + 1})", walks)  # type: ignore[arg-type]
    await lister.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tools", type=int, default=1, help="hello tool processes")
    parser.add_argument(
        "--agents", type=int, default=1000, help="agents registered for the tools/list run"
    )
    args = parser.parse_args()
    with scratch_infra("gateway") as infra:
        asyncio.run(bench(args, infra))


if __name__ == "__main__":
    main()
