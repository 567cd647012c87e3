"""Benchmark: the agent runtime's own costs, without a network.

    uv run python bench/runtime.py [--executions 200] [--steps 10]

Prints:

- the loop's overhead per step on the scripted driver (no network, a trivial
  tool): p50/p99 of the time from one step's end to the next, without
  snapshots and with a snapshot after every step (full + slim serialized into
  memory, what the memory-service store does before its HTTP call); events go
  to a sink that keeps them, as a UI adapter's would;
- full and slim (minimal, standard) serialize/deserialize time and size for
  states of 10, 100 and 1,000 messages (user turns of ~200 characters, answers
  of ~800);
- ``to_json_safe`` throughput on a typical tool result (~1 KiB of nested data)
  and on a hostile one (a cycle, bytes, NaN, a 100 KiB string).

Targets: loop overhead per step ≤ 2 ms p50 without snapshots; slim
``standard()`` ≤ 10% of the full size at 1,000 messages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from _common import percentile

from disco.runtime import (
    AgentRunner,
    AgentState,
    AgentStatus,
    CollectingSink,
    FullSerializer,
    InMemorySnapshotStore,
    Message,
    RuntimeEvent,
    ScriptedDriver,
    ScriptedReply,
    ScriptedToolCall,
    SlimConfig,
    SlimSerializer,
    StepCompleted,
    StepsLimit,
    agent_tool,
    to_json_safe,
)


@agent_tool
def lookup(city: str) -> str:
    """A trivial tool."""
    return f"{city}: sunny"


class StepClock(CollectingSink):
    """Keeps the events and the time each step ended."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []

    async def emit(self, event: RuntimeEvent) -> None:
        if isinstance(event, StepCompleted):
            self.ends.append(time.perf_counter())
        await super().emit(event)


def script(steps: int, execution: int) -> list[Any]:
    calls = [
        ScriptedReply(
            tool_calls=[ScriptedToolCall("lookup", {"city": "Oslo"}, id=f"c{execution}-{i}")]
        )
        for i in range(steps - 1)
    ]
    return [*calls, ScriptedReply(text="It is sunny in Oslo.")]


async def loop_overhead(executions: int, steps: int, *, snapshots: bool) -> list[float]:
    """Milliseconds between consecutive step ends (the first step of each run excluded)."""
    samples: list[float] = []
    for execution in range(executions):
        runner = AgentRunner(
            "bench",
            driver=ScriptedDriver(script(steps, execution)),
            tools=[lookup],
            criteria=[StepsLimit(steps + 1)],
            snapshots=InMemorySnapshotStore() if snapshots else None,
        )
        clock = StepClock()
        state = await runner.send(
            runner.new_state(f"s-{execution}"), "Weather in Oslo?", events=clock
        )
        assert state.status is AgentStatus.COMPLETED, state.error
        samples.extend((b - a) * 1000 for a, b in zip(clock.ends, clock.ends[1:], strict=False))
    return samples


def conversation(count: int) -> AgentState:
    now = datetime.now(UTC)
    messages = tuple(
        Message.user(f"Question {i}: " + "q" * 190)
        if i % 2 == 0
        else Message.assistant(f"Answer {i}: " + "a" * 790)
        for i in range(count)
    )
    state = AgentState(
        agent_id="assistant",
        session_id="bench",
        status=AgentStatus.COMPLETED,
        messages=messages,
        metadata={"customer": "c-7", "channel": "web"},
    )
    return state.with_(execution=state.execution.model_copy(update={"started_at": now}))


def timed(function: Callable[[], Any], *, repeat: int) -> tuple[float, Any]:
    """Median milliseconds of ``repeat`` calls, and the last result."""
    times: list[float] = []
    result: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def serializers() -> list[list[str]]:
    rows: list[list[str]] = []
    full = FullSerializer()
    slims = {
        "slim minimal": SlimSerializer(SlimConfig.minimal()),
        "slim standard": SlimSerializer(),
    }
    for count in (10, 100, 1000):
        state = conversation(count)
        repeat = 50 if count < 1000 else 10
        write_ms, data = timed(lambda: full.serialize(state), repeat=repeat)  # noqa: B023
        full_bytes = len(json.dumps(data, ensure_ascii=False).encode())
        read_ms, restored = timed(lambda: full.deserialize(data), repeat=repeat)  # noqa: B023
        assert restored == state
        rows.append(
            [f"{count}", "full", f"{write_ms:.3f}", f"{read_ms:.3f}", f"{full_bytes:,}", "100%"]
        )
        for name, slim in slims.items():
            write_ms, data = timed(lambda: slim.serialize(state), repeat=repeat)  # noqa: B023
            size = len(json.dumps(data, ensure_ascii=False).encode())
            read_ms, _ = timed(lambda: slim.deserialize(data), repeat=repeat)  # noqa: B023
            rows.append(
                [
                    f"{count}",
                    name,
                    f"{write_ms:.3f}",
                    f"{read_ms:.3f}",
                    f"{size:,}",
                    f"{100 * size / full_bytes:.1f}%",
                ]
            )
    return rows


def typical_result() -> dict[str, Any]:
    return {
        "city": "Oslo",
        "forecast": [
            {"day": i, "high": 3.5 + i, "low": -2.0, "summary": "snow showers, wind from the north"}
            for i in range(7)
        ],
        "source": {"name": "met.no", "fetched_at": datetime.now(UTC)},
        "alerts": ["ice on roads", "strong wind"],
    }


def hostile_result() -> dict[str, Any]:
    cycle: list[Any] = ["loop"]
    cycle.append(cycle)
    return {"cycle": cycle, "raw": b"\x00" * 512, "nan": float("nan"), "text": "t" * 100_000}


def json_safe_rate(value: Any, seconds: float = 1.0) -> tuple[float, int]:
    size = len(json.dumps(to_json_safe(value), ensure_ascii=False).encode())
    count = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        to_json_safe(value)
        count += 1
    return count / seconds, size


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    await loop_overhead(10, args.steps, snapshots=True)  # warm up
    bare = await loop_overhead(args.executions, args.steps, snapshots=False)
    saved = await loop_overhead(args.executions, args.steps, snapshots=True)
    print(f"loop overhead per step ({len(bare)} steps, scripted driver, no network), ms")
    print(
        table(
            ["", "p50", "p99", "mean"],
            [
                [
                    name,
                    f"{percentile(samples, 0.5):.3f}",
                    f"{percentile(samples, 0.99):.3f}",
                    f"{statistics.fmean(samples):.3f}",
                ]
                for name, samples in (("without snapshots", bare), ("with snapshots", saved))
            ],
        )
    )
    p50 = percentile(bare, 0.5)
    print(
        f"target: p50 without snapshots <= 2 ms: {'met' if p50 <= 2 else 'MISSED'} ({p50:.3f} ms)"
    )

    rows = serializers()
    print("\nserializers (median of repeated runs)")
    print(table(["messages", "format", "serialize ms", "deserialize ms", "bytes", "of full"], rows))
    standard = next(r for r in rows if r[0] == "1000" and r[1] == "slim standard")
    ratio = float(standard[5].rstrip("%"))
    print(
        f"target: slim standard <= 10% of full at 1,000 messages: "
        f"{'met' if ratio <= 10 else 'MISSED'} ({ratio:.1f}%)"
    )

    print("\nto_json_safe")
    rate_rows = []
    for name, value in (("typical tool result", typical_result()), ("hostile", hostile_result())):
        rate, size = json_safe_rate(value)
        rate_rows.append([name, f"{size:,}", f"{rate:,.0f}", f"{rate * size / 1e6:.1f}"])
    print(table(["value", "bytes out", "calls/s", "MB/s out"], rate_rows))


if __name__ == "__main__":
    asyncio.run(main())
