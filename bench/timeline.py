"""Benchmark: where one tool round trip's time goes, step by step, in both processes.

    uv run --group bench python bench/timeline.py [--round-trips 100]

Starts an embedded Tansu broker on a free loopback port unless
DISCO_KAFKA_BOOTSTRAP names one. A disco caller (``BusClient.request(wait=...)``)
sends requests one at a time, first to the raw aiokafka responder of
``bench/table.py``, then to a disco :class:`~disco.Tool`, each in a process of
its own. Both processes stamp their steps with the wall clock (one machine, one
clock): in the responder, when a fetch came back with the request, when
``getmany`` handed it over, when the handler ran (disco), when the answer's
produce request left and was acknowledged; in the caller, when its fetch came
back with the answer and when ``request`` returned. Printed: the median of each
step after the request started, per responder, so a difference between the two
shows in which hop it arises.

Figures, not assertions: the tests never time anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import table as table_bench
from _common import raw_fetch_wait, scratch_broker
from aiokafka.client import AIOKafkaClient
from aiokafka.consumer.consumer import AIOKafkaConsumer

from disco import Tool
from disco.bus import BusClient

STEPS = ("fetched", "handed over", "handler", "answer sent", "answer acked", "caller fetched")


agents_bench = table_bench.agents_bench
Work, Done = agents_bench.Work, agents_bench.Done  # the bench Tool's request and answer


def _has_records(response: Any) -> bool:
    return any(p[-1] for _, partitions in response.topics for p in partitions)


@contextlib.contextmanager
def stamped(stamps: list[tuple[str, float]], *, fetched: str, handed_over: bool) -> Iterator[None]:
    """Stamp this process's fetches that bring records, its produce requests and (when
    ``handed_over``) every ``getmany`` that returns records."""
    send, getmany = AIOKafkaClient.send, AIOKafkaConsumer.getmany

    async def timed_send(self: AIOKafkaClient, node_id: int, request: Any, **kwargs: Any) -> Any:
        kind = type(request).__name__
        if kind == "ProduceRequest":
            stamps.append(("answer sent", time.time()))
        response = await send(self, node_id, request, **kwargs)
        if kind == "FetchRequest" and _has_records(response):
            stamps.append((fetched, time.time()))
        elif kind == "ProduceRequest":
            stamps.append(("answer acked", time.time()))
        return response

    async def timed_getmany(self: AIOKafkaConsumer, *args: Any, **kwargs: Any) -> Any:
        batches = await getmany(self, *args, **kwargs)
        if batches:
            stamps.append(("handed over", time.time()))
        return batches

    AIOKafkaClient.send = timed_send  # type: ignore[method-assign]
    if handed_over:
        AIOKafkaConsumer.getmany = timed_getmany  # type: ignore[method-assign]
    try:
        yield
    finally:
        AIOKafkaClient.send = send  # type: ignore[method-assign]
        AIOKafkaConsumer.getmany = getmany  # type: ignore[method-assign]


# -- the responder processes ---------------------------------------------------------------


async def serve(side: str, bootstrap: str, prefix: str, out: str) -> None:
    """Answer as ``side`` ("raw" or "disco") with every step stamped, until SIGTERM; then
    write the stamps to ``out``."""
    stamps: list[tuple[str, float]] = []
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(15, stopping.set)
    with stamped(stamps, fetched="fetched", handed_over=True):
        if side == "raw":
            task = asyncio.create_task(table_bench.serve_raw_responder(bootstrap, prefix))
            await stopping.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        else:
            tool = Tool(
                "bench-tool",
                bus_settings=agents_bench.settings_for(bootstrap, prefix),
                register=False,
                validate_requests=False,
            )

            @tool.on_invoke("bench.tool.requested")
            async def work(request: Work) -> Done:
                stamps.append(("handler", time.time()))
                return Done(n=request.n + 1, size=len(request.blob))

            await tool.start()
            await tool.wait_ready(60)
            print("ready", flush=True)
            await stopping.wait()
            await tool.stop()
    await asyncio.to_thread(Path(out).write_text, json.dumps(stamps))


# -- the caller --------------------------------------------------------------------------


async def timeline(bootstrap: str, side: str, rounds: int) -> dict[str, list[float]]:
    settings = await table_bench.provisioned(bootstrap, agents_bench.PARTITIONS)
    await raw_fetch_wait(settings)
    with tempfile.TemporaryDirectory() as scratch:
        out = f"{scratch}/stamps.json"
        process = table_bench.start_process(
            [sys.executable, __file__, "--serve", side, bootstrap, settings.topic_prefix, out]
        )
        caller: list[tuple[str, float]] = []
        windows = []
        try:
            with stamped(caller, fetched="caller fetched", handed_over=False):
                async with BusClient(settings, name="bench-caller") as bus:
                    for index in range(rounds + 20):  # 20 to warm up
                        started = time.time()
                        await bus.request(
                            "bench.tool.requested",
                            agents_bench.PAYLOAD,
                            response_event="bench.tool.answered",
                            wait=30,
                        )
                        if index >= 20:
                            windows.append((started, time.time()))
        finally:
            process.terminate()
            process.wait(30)
        written = await asyncio.to_thread(Path(out).read_text)
        responder = [tuple(stamp) for stamp in json.loads(written)]
    stamps = responder + [stamp for stamp in caller if stamp[0] == "caller fetched"]
    steps: dict[str, list[float]] = {step: [] for step in (*STEPS, "answered")}
    for started, ended in windows:
        inside = sorted((t, step) for step, t in stamps if started <= t <= ended)
        seen: dict[str, float] = {}
        for t, step in inside:
            if step == "caller fetched":
                seen[step] = t  # the last: the one with the answer
            else:
                seen.setdefault(step, t)
        for step, t in seen.items():
            steps[step].append((t - started) * 1000)
        steps["answered"].append((ended - started) * 1000)
    return steps


async def main(args: argparse.Namespace) -> None:
    with scratch_broker("timeline") as bootstrap:
        print(f"broker {bootstrap}; {os.cpu_count()} cores; {args.round_trips} round trips each")
        results = {
            side: await timeline(bootstrap, side, args.round_trips) for side in ("raw", "disco")
        }
        print(f"{'ms after the request started (p50)':36} {'raw responder':>14} {'disco Tool':>11}")
        for step in (*STEPS, "answered"):
            cells = [
                f"{statistics.median(results[side][step]):.2f}" if results[side][step] else "-"
                for side in ("raw", "disco")
            ]
            print(f"{step:36} {cells[0]:>14} {cells[1]:>11}")


def cli() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="50 round trips each")
    parser.add_argument("--round-trips", type=int)
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DISCO_LOG_LEVEL", "WARNING")
    if args.serve:
        asyncio.run(serve(*args.serve))
        return 0
    args.round_trips = args.round_trips or (50 if args.quick else 200)
    asyncio.run(main(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
