"""Benchmark: the agent layers beside the raw bus, in one run.

    uv run python bench/agents.py [--round-trips 300] [--invocations 3000] [--goals 20]

Starts an embedded Tansu broker and PostgreSQL on free loopback ports unless
DISCO_KAFKA_BOOTSTRAP / DISCO_DATABASE_ADMIN_URL name them. Prints one table:

- raw two-hop round trip (plain aiokafka: request topic -> responder -> result
  topic) and the bus's own ``request(wait=...)`` round trip, both from
  ``bench/bus.py`` (imported, not copied);
- Tool round trip p50/p99: ``bus.request(wait=...)`` to a :class:`disco.Tool`
  running in its own process (validating a pydantic request, dumping a pydantic
  answer), one request at a time;
- sustained Tool invocations/s with 1 and 4 tool processes (one consumer group,
  8 partitions), with up to ``--window`` requests in flight;
- Planner: time per state transition of a 10-state linear plan whose every state
  asks the Tool; the overhead per transition is that minus the Tool round trip.
  Once with plan contexts in :class:`disco.testing.InMemoryMemory` (the SDK's
  own cost), once against the memory service as a real process on an embedded
  PostgreSQL (or ``DISCO_DATABASE_ADMIN_URL``'s), as a Planner runs: each
  transition asks which envelopes of the fetched batch its group handled
  (durable dedup), reads the plan context, saves it, and marks the answer handled.
- Worker: time per task of one that asks the Tool three things at once and
  answers when all came back (fan-out, fan-in), the same two ways.

Targets (issue 5): Tool round trip p50 <= 2x the raw two-hop round trip;
throughput grows with instances until the machine's 2 cores are busy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import (
    BusyCores,
    cpu_seconds,
    known_fetch_wait,
    percentile,
    raw_fetch_wait,
    scratch_infra,
    start_service,
    wait_ready,
)
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import BaseModel

from disco import (
    DelegationSpec,
    PlanDefinition,
    Planner,
    ResultContext,
    StateAction,
    StateConfig,
    StateTransition,
    TaskContext,
    Tool,
    Worker,
)
from disco.agents import AgentOptions
from disco.bus import BusClient
from disco.clients import ServiceClientSettings
from disco.settings import BusSettings
from disco.testing import InMemoryMemory
from disco_common.topics import Topic

HERE = Path(__file__).resolve().parent


def _bus_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_bus", HERE / "bus.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {HERE / 'bus.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Work(BaseModel):
    blob: str
    n: int = 0


class Done(BaseModel):
    n: int
    size: int


def make_tool(settings: BusSettings) -> Tool:
    tool = Tool("bench-tool", bus_settings=settings, register=False, validate_requests=False)

    @tool.on_invoke("bench.tool.requested")
    async def work(request: Work) -> Done:
        return Done(n=request.n + 1, size=len(request.blob))

    return tool


PAYLOAD = {"blob": "x" * 180, "n": 1}


PARTITIONS = int(os.environ.get("BENCH_PARTITIONS", "8"))


def settings_for(bootstrap: str, prefix: str, partitions: int = PARTITIONS) -> BusSettings:
    return BusSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=prefix,
        kafka_partitions=partitions,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=500,
    )


# -- tool processes --------------------------------------------------------------------


async def serve_tool(bootstrap: str, prefix: str) -> None:
    tool = make_tool(settings_for(bootstrap, prefix))
    await tool.start()
    await tool.wait_ready(60)
    print("ready", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await tool.stop()


def start_tools(count: int, bootstrap: str, prefix: str) -> list[subprocess.Popen[bytes]]:
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve-tool", bootstrap, prefix],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    for process in processes:
        assert process.stdout is not None
        for line in process.stdout:  # structlog writes to stdout too
            if line.strip() == b"ready":
                break
        else:
            raise RuntimeError("a tool process did not start")
    return processes


def stop_tools(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


async def provision(settings: BusSettings) -> None:
    async with BusClient(settings) as bus:
        await bus.ensure_topics([Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS, Topic.SYSTEM_EVENTS])


# -- measurements ------------------------------------------------------------------------


async def tool_round_trips(settings: BusSettings, rounds: int) -> list[float]:
    async with BusClient(settings, name="bench-caller") as bus:
        for _ in range(20):  # warm-up: listener positioned, connections made
            await bus.request(
                "bench.tool.requested", PAYLOAD, response_event="bench.tool.answered", wait=30
            )
        latencies = []
        for _ in range(rounds):
            started = time.perf_counter()
            await bus.request(
                "bench.tool.requested", PAYLOAD, response_event="bench.tool.answered", wait=30
            )
            latencies.append(time.perf_counter() - started)
        return latencies


async def results_reader(settings: BusSettings) -> AIOKafkaConsumer:
    """A raw group-less reader of action-results, positioned at the end of every partition."""
    results = f"{settings.topic_prefix}{Topic.ACTION_RESULTS}"
    reader = AIOKafkaConsumer(
        enable_auto_commit=False,
        fetch_max_wait_ms=known_fetch_wait(settings),
        **settings.kafka_connection_options(),
    )
    await reader.start()
    await reader.topics()
    partitions = [TopicPartition(results, p) for p in reader.partitions_for_topic(results) or ()]
    reader.assign(partitions)
    await reader.seek_to_end()
    for tp in partitions:  # resolve the lazy positions now, before any answer exists
        await reader.position(tp)
    return reader


async def tool_throughput(settings: BusSettings, invocations: int, window: int) -> float:
    """Answers per second, with a cheap load generator.

    Requests go out pipelined (``bus.send``, at most ``window`` unanswered);
    answers are counted by a raw group-less reader from their ``ce_type``
    header, without parsing, so the caller costs as little CPU as possible and
    the figure is the tools' own.
    """
    reader = await results_reader(settings)
    try:
        answered = 0
        progress = asyncio.Event()

        async def count() -> None:
            nonlocal answered
            while answered < invocations:
                for records in (await reader.getmany(timeout_ms=100)).values():
                    answered += sum(
                        1 for r in records if ("ce_type", b"bench.tool.answered") in list(r.headers)
                    )
                progress.set()

        async with BusClient(settings, name="bench-load") as bus:
            counter = asyncio.create_task(count())
            started = time.perf_counter()
            sent = 0
            while sent < invocations:
                if sent - answered >= window:
                    progress.clear()
                    await progress.wait()
                    continue
                await bus.send(
                    Topic.ACTION_REQUESTS,
                    "bench.tool.requested",
                    PAYLOAD,
                    response_event="bench.tool.answered",
                    correlation_id=uuid.uuid4().hex,
                )
                sent += 1
            await asyncio.wait_for(counter, 300)
            return invocations / (time.perf_counter() - started)
    finally:
        await reader.stop()


STEPS = 10


def linear_plan() -> PlanDefinition:
    states = [StateConfig(state_name="start", default_next="s0")]
    for i in range(STEPS):
        states.append(
            StateConfig(
                state_name=f"s{i}",
                action=StateAction(
                    event_type="bench.tool.requested",
                    response_event=f"bench.step{i}.done",
                    data={"blob": "{goal_data.blob}", "n": i},
                ),
                transitions=[
                    StateTransition(
                        on_event=f"bench.step{i}.done",
                        to_state=f"s{i + 1}" if i + 1 < STEPS else "done",
                        condition="success",
                    )
                ],
            )
        )
    states.append(StateConfig(state_name="done", is_terminal=True))
    return PlanDefinition(plan_type="bench.linear", states=states)


def _agent_options(
    name: str, settings: BusSettings, memory_url: str | None
) -> tuple[str, AgentOptions]:
    """An unregistered agent's name and options: its contexts in this process, or
    (``memory_url``) in that memory service (another group name: the two runs share
    the topics)."""
    options: AgentOptions = {
        "bus_settings": settings,
        "register": False,
        "validate_requests": False,
    }
    if memory_url is None:
        return name, {**options, "memory": InMemoryMemory()}
    return f"{name}-m", {
        **options,
        "client_settings": ServiceClientSettings(memory_url=memory_url),
    }


async def planner_per_transition(
    settings: BusSettings, goals: int, memory_url: str | None = None
) -> list[float]:
    """Seconds per transition of each of ``goals`` plans; plan contexts in this process,
    or (``memory_url``) in that memory service, with durable dedup."""
    name, options = _agent_options("bench-planner", settings, memory_url)
    planner = Planner(name, **options)
    planner.add_plan("bench.plan.goal", linear_plan())
    async with planner, BusClient(settings, name="bench-caller") as bus:
        await planner.wait_ready(60)
        await bus.request(
            "bench.plan.goal", {"blob": "x" * 180}, response_event="bench.plan.done", wait=60
        )
        per_transition = []
        for _ in range(goals):
            started = time.perf_counter()
            answer = await bus.request(
                "bench.plan.goal", {"blob": "x" * 180}, response_event="bench.plan.done", wait=60
            )
            elapsed = time.perf_counter() - started
            if not (isinstance(answer.data, dict) and answer.data.get("success")):
                raise RuntimeError(f"the plan failed: {answer.data}")
            per_transition.append(elapsed / (STEPS + 1))
        return per_transition


FAN_OUT = 3


async def worker_per_task(
    settings: BusSettings, tasks: int, memory_url: str | None = None
) -> list[float]:
    """Seconds per task of a Worker that asks the Tool :data:`FAN_OUT` things at once and
    answers when all came back; task contexts in this process, or (``memory_url``) in
    that memory service, with durable dedup."""
    name, options = _agent_options("bench-worker", settings, memory_url)
    worker = Worker(name, **options)

    @worker.on_task("bench.fan.requested")
    async def fan_out(task: TaskContext[Any]) -> None:
        await task.delegate_parallel(
            [
                DelegationSpec(
                    event_type="bench.tool.requested",
                    data={"blob": task.data["blob"], "n": n},
                    response_event="bench.fanned",
                )
                for n in range(FAN_OUT)
            ]
        )

    @worker.on_result("bench.fanned")
    async def fan_in(result: ResultContext) -> None:
        task = await result.restore_task()
        answers = task.aggregate_parallel_results(task.parallel_groups[0])
        if answers is not None:
            await task.complete({"answers": len(answers)})

    async with worker, BusClient(settings, name="bench-caller") as bus:
        await worker.wait_ready(60)
        seconds = []
        for index in range(tasks + 1):
            started = time.perf_counter()
            answer = await bus.request(
                "bench.fan.requested", {"blob": "x" * 180}, response_event="bench.fan.done", wait=60
            )
            if not (isinstance(answer.data, dict) and answer.data.get("success")):
                raise RuntimeError(f"the task failed: {answer.data}")
            if index:  # the first warms up
                seconds.append(time.perf_counter() - started)
        return seconds


@contextlib.asynccontextmanager
async def memory_service(database_url: str, bootstrap: str, prefix: str) -> AsyncIterator[str]:
    """The memory service as a process on ``database_url``: its base URL."""
    process, base_url = start_service("memory", database_url, bootstrap, prefix)
    try:
        await wait_ready("memory service", base_url, process, limit_seconds=90)
        yield base_url
    finally:
        process.terminate()
        process.wait(30)


async def main(
    bootstrap: str, database_url: str, rounds: int, invocations: int, window: int, goals: int
) -> None:
    run = uuid.uuid4().hex[:6]
    phase = 0

    def fresh(partitions: int = PARTITIONS) -> BusSettings:
        nonlocal phase
        phase += 1
        return settings_for(bootstrap, f"bagents{run}.{phase}.", partitions)

    bus_bench = _bus_bench()
    print(f"broker {bootstrap}; {rounds} round trips; {invocations} invocations, window {window}")

    raw_settings = fresh(3)
    await raw_fetch_wait(raw_settings)
    await provision(raw_settings)
    raw = bus_bench.raw_round_trips(raw_settings, rounds)
    raw_rt = await raw
    bus_settings = fresh(3)
    await provision(bus_settings)
    bus_rt = await bus_bench.disco_round_trips(bus_settings, rounds)

    results: dict[str, Any] = {}
    for instances in (1, 4):
        settings = fresh()
        await provision(settings)
        tools = start_tools(instances, bootstrap, settings.topic_prefix)
        try:
            await asyncio.sleep(2.5)  # let the group settle after the last join
            if instances == 1:
                results["tool_rt"] = await tool_round_trips(settings, rounds)
            busy = BusyCores()
            tools_before = sum(cpu_seconds(tool.pid) for tool in tools)
            client_before, wall_before = time.process_time(), time.perf_counter()
            busy.start()
            results[f"tps{instances}"] = await tool_throughput(settings, invocations, window)
            cores = busy.stop()
            wall = time.perf_counter() - wall_before
            tools_cores = (sum(cpu_seconds(tool.pid) for tool in tools) - tools_before) / wall
            client_cores = (time.process_time() - client_before) / wall
        finally:
            stop_tools(tools)
        print(
            f"  {instances} tool process(es): {results[f'tps{instances}']:,.0f} invocations/s; "
            f"cores busy {cores:.2f} of {os.cpu_count()}: tools {tools_cores:.2f}, "
            f"load generator {client_cores:.2f}, broker and the rest "
            f"{max(0.0, cores - tools_cores - client_cores):.2f}"
        )
        results[f"cores{instances}"] = cores

    settings = fresh()
    await provision(settings)
    tools = start_tools(1, bootstrap, settings.topic_prefix)
    try:
        await asyncio.sleep(2.5)
        plan_steps = await planner_per_transition(settings, goals)
        fan_tasks = await worker_per_task(settings, goals)
        async with memory_service(database_url, bootstrap, settings.topic_prefix) as memory_url:
            served_steps = await planner_per_transition(settings, goals, memory_url)
            served_fans = await worker_per_task(settings, goals, memory_url)
        step_tool_rt = await tool_round_trips(settings, min(rounds, 100))
    finally:
        stop_tools(tools)

    ms = 1000.0
    raw_p50, raw_p99 = statistics.median(raw_rt) * ms, percentile(raw_rt, 0.99) * ms
    bus_p50 = statistics.median(bus_rt) * ms
    tool_p50 = statistics.median(results["tool_rt"]) * ms
    tool_p99 = percentile(results["tool_rt"], 0.99) * ms
    step_p50 = statistics.median(plan_steps) * ms
    served_p50 = statistics.median(served_steps) * ms
    overhead = step_p50 - statistics.median(step_tool_rt) * ms
    served_overhead = served_p50 - statistics.median(step_tool_rt) * ms
    print()
    print(f"{'':44} {'value':>10} {'x raw':>8} {'target':>8}")
    print(f"{'raw two-hop round trip p50 / p99 (ms)':44} {raw_p50:>5.1f}/{raw_p99:<4.1f}")
    print(
        f"{'bus request(wait) round trip p50 (ms)':44} {bus_p50:>10.1f} {bus_p50 / raw_p50:>8.2f}"
    )
    print(
        f"{'Tool round trip p50 (ms)':44} {tool_p50:>10.1f} {tool_p50 / raw_p50:>8.2f} "
        f"{'<= 2.00':>8}"
    )
    print(f"{'Tool round trip p99 (ms)':44} {tool_p99:>10.1f} {tool_p99 / raw_p99:>8.2f}")
    print(f"{'Tool invocations/s, 1 process':44} {results['tps1']:>10,.0f}")
    print(
        f"{'Tool invocations/s, 4 processes':44} {results['tps4']:>10,.0f} "
        f"{results['tps4'] / results['tps1']:>7.2f}x"
    )
    print(
        f"{'  cores busy, 1 / 4 processes':44} "
        f"{results['cores1']:>5.2f}/{results['cores4']:<4.2f} of {os.cpu_count()}"
    )
    print(f"{'Planner time per state transition p50 (ms)':44} {step_p50:>10.1f}")
    print(f"{'  of which planner overhead (ms)':44} {overhead:>10.1f}")
    print(f"{'  the same with the memory service (ms)':44} {served_p50:>10.1f}")
    print(f"{'  of which planner overhead (ms)':44} {served_overhead:>10.1f}")
    print(
        f"{f'Worker task, {FAN_OUT} sub-tasks at once, p50 (ms)':44} "
        f"{statistics.median(fan_tasks) * ms:>10.1f}"
    )
    print(
        f"{'  the same with the memory service (ms)':44} "
        f"{statistics.median(served_fans) * ms:>10.1f}"
    )
    print(
        f"\n(cores: {os.cpu_count()}; plan contexts in this process, then in the memory service "
        "with durable dedup; tool answers validated by pydantic)"
    )


def cli() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--invocations", type=int, default=3000)
    parser.add_argument("--window", type=int, default=200, help="requests in flight")
    parser.add_argument("--goals", type=int, default=20, help="plans run for the planner figure")
    parser.add_argument(
        "--serve-tool", nargs=2, metavar=("BOOTSTRAP", "PREFIX"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve_tool:
        asyncio.run(serve_tool(*args.serve_tool))
        return 0
    with scratch_infra("agents") as infra:
        asyncio.run(
            main(
                infra.bootstrap,
                infra.database_url,
                args.round_trips,
                args.invocations,
                args.window,
                args.goals,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(cli())
