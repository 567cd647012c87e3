"""Effects exactly once across crashes: a kill -9 campaign against a Worker process.

The Worker (``tests.e2e.agents.campaign``) applies an effect outside disco, a
ledger line, with its handler's idempotency key, and keeps its dedup marks in
the memory service (the Workers' default). Its process is killed with SIGKILL
at five random points of the run and started again each time; the counts that
matter are then taken from the ledger and the results topic: tasks lost (no
effect, or no answer) and effects applied twice, both asserted to be 0.

``DISCO_CAMPAIGN_TASKS`` sets the number of tasks (default 40, so that the
suite stays quick on a small machine; the campaign of the issue is 1,000).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import signal
from collections import Counter
from pathlib import Path

import pytest

from disco.bus import BusClient
from tests.e2e.agents import CAMPAIGN_LEDGER_ENV
from tests.e2e.conftest import (
    TENANT,
    AgentProcess,
    Stack,
    Watcher,
    launch_agents,
    start_agents,
    stop_agents,
)
from tests.fixtures.waiting import eventually

CAMPAIGN_TASKS_ENV = "DISCO_CAMPAIGN_TASKS"
DEFAULT_TASKS = 40
KILLS = 5
TASKS = int(os.environ.get(CAMPAIGN_TASKS_ENV, DEFAULT_TASKS))
# Ends a broken run instead of hanging it; a busy 2-core box handles a few tasks a second.
DEADLINE = 120.0 + TASKS

pytestmark = pytest.mark.timeout(2 * DEADLINE + 120)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_worker_killed_at_random_five_times_loses_no_task_and_applies_none_twice(
    e2e_stack: Stack, caller: BusClient, watcher: Watcher, tmp_path: Path
) -> None:
    tasks = TASKS
    ledger = tmp_path / "ledger"
    runs = tmp_path / "ledger.runs"
    # A restarted worker rejoins its group once the killed member's session is over
    # (the embedded broker waits it out twice): a short session keeps the five restarts
    # quick. The worker is alone in its group; a session lost to a stall only redelivers.
    env = {
        **e2e_stack.env,
        CAMPAIGN_LEDGER_ENV: str(ledger),
        "DISCO_KAFKA_SESSION_TIMEOUT_MS": "1000",
        "DISCO_KAFKA_HEARTBEAT_INTERVAL_MS": "300",
    }
    stack = dataclasses.replace(e2e_stack, env=env)
    kill_at = sorted(random.sample(range(1, tasks), KILLS))
    worker: AgentProcess = await asyncio.to_thread(start_agents, stack, "campaign")
    # The next worker waits with its imports done, so a restart is the rejoin alone.
    standby = launch_agents(stack, "campaign", standby=True)
    try:
        requests = [
            await caller.request(
                "e2e.campaign.requested",
                {"n": n},
                response_event="e2e.campaign.done",
                tenant_id=TENANT,
            )
            for n in range(tasks)
        ]
        for point in kill_at:
            await eventually(
                lambda point=point: len(_lines(ledger)) >= point,  # type: ignore[misc]
                timeout=DEADLINE,
                what=f"{point} effects applied",
            )
            worker.process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(worker.process.wait, 10)
            worker = await asyncio.to_thread(standby.go().wait_ready)
            standby = launch_agents(stack, "campaign", standby=True)

        asked = {request.correlation_id for request in requests}

        def answered() -> set[str]:
            return {
                envelope.correlation_id
                for envelope in watcher.matching(
                    lambda topic, e: topic == "action-results" and e.correlation_id in asked
                )
                if envelope.correlation_id is not None
            }

        # A miss is counted below, with the rest.
        with contextlib.suppress(AssertionError):
            await eventually(
                lambda: len(answered()) == tasks, timeout=DEADLINE, what="every answer"
            )
    finally:
        stop_agents(worker, standby)

    effects = Counter(line.split(" ", 1)[1] for line in _lines(ledger))
    lost_effects = tasks - len(effects)
    applied_twice = sum(1 for count in effects.values() if count > 1)
    lost_answers = tasks - len(answered())
    handler_runs = len(_lines(runs))
    print(
        f"campaign: {tasks} tasks, {KILLS} SIGKILLs at effects {kill_at}: "
        f"lost {lost_effects} (effects) / {lost_answers} (answers), applied twice "
        f"{applied_twice}; handler runs {handler_runs} ({handler_runs - tasks} re-runs "
        "after a crash, whose effect the idempotency key kept single)"
    )
    assert (lost_effects, lost_answers, applied_twice) == (0, 0, 0)
    assert set(effects) == {str(n) for n in range(tasks)}
