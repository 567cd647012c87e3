"""The examples run end to end: `make demo`, and the planner's HITL pause answered from the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from disco._dev.ports import free_port
from disco.bus import BusClient
from disco.clients import RegistryClient, ServiceClientSettings, TrackerClient
from disco_common.registry import AgentRecord
from tests.e2e.conftest import ROOT, TENANT, Stack
from tests.fixtures.waiting import eventually

EXAMPLES = ROOT / "examples"
DISCO = {name: ["-m", "disco._cli.main", name] for name in ("ask", "answer")}


def run_example(stack: Stack, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<args[0]>`` with the rest as its arguments (``ask`` and ``answer``:
    those ``disco`` commands)."""
    program = DISCO[args[0]] if args[0] in DISCO else [str(EXAMPLES / args[0])]
    return subprocess.run(
        [sys.executable, *program, *args[1:]],
        env=stack.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def ask_in_background(
    stack: Stack, event_type: str, data: str, wait: int
) -> asyncio.subprocess.Process:
    """``disco ask EVENT_TYPE DATA --wait WAIT``, running (its output piped)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        *DISCO["ask"],
        event_type,
        data,
        "--wait",
        str(wait),
        env=stack.env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def question_waits(stack: Stack, words: str, *, what: str) -> None:
    """Until the tracker lists a question to a person with ``words`` in it (it records the
    question from the bus)."""
    settings = ServiceClientSettings(tracker_url=stack.urls["tracker"], tenant_id=TENANT)
    async with TrackerClient.from_settings(settings) as tracker:

        async def asked() -> bool:
            waiting = [q async for q in tracker.iter_questions(status="waiting")]
            return any(words in (q.question or "") for q in waiting)

        await eventually(asked, timeout=90, interval=0.2, what=what)


def test_the_demo_runs_a_tool_a_worker_a_planner_and_an_llm_agent_against_the_stack(
    e2e_stack: Stack,
) -> None:
    demo = run_example(e2e_stack, "demo.py")

    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert '"message": "Bonjour, Ada!"' in demo.stdout
    assert '"carrier": "slow-boat"' in demo.stdout
    assert "searching -> booking  (on trip.flights.found)" in demo.stdout
    assert '"reference": "BK-42"' in demo.stdout
    assert '"text": "Here you are: Atlantis: stormy, 18°C, waves of 6 m"' in demo.stdout
    assert "book_trip({'city': 'Lisbon', 'date': '2026-05-01'}) waits for approval" in demo.stdout
    assert "TRIP-LIS-2026-05-01" in demo.stdout


def test_the_demo_says_how_to_start_a_stack_when_none_runs(e2e_stack: Stack) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    env = {
        **e2e_stack.env,
        "DISCO_KAFKA_BOOTSTRAP": nowhere,
        "DISCO_REGISTRY_URL": f"http://{nowhere}",
        "DISCO_MEMORY_URL": f"http://{nowhere}",
    }
    demo = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert demo.returncode == 1
    assert "make dev" in demo.stderr


async def test_the_travel_planner_pauses_for_a_human_answered_from_the_command_line(
    e2e_stack: Stack,
) -> None:
    planner = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "travel_planner.py")],
        env=e2e_stack.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        asking = await ask_in_background(e2e_stack, "trip.requested", '{"city": "Atlantis"}', 90)
        await question_waits(e2e_stack, "Go by boat instead?", what="the planner's question")
        listed = await asyncio.to_thread(run_example, e2e_stack, "answer")
        listing, complaints = listed.stdout, listed.stderr
        answered = await asyncio.to_thread(run_example, e2e_stack, "answer", "yes")
        out, err = await asyncio.wait_for(asking.communicate(), 120)
    finally:
        planner.terminate()
        planner.wait(20)

    assert "No flights to Atlantis. Go by boat instead? (yes/no)" in listing
    assert "no tracker" not in complaints  # listed from the tracker's inbox
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert asking.returncode == 0, err.decode()
    assert '"booked": "boat"' in out.decode()


async def test_an_agent_served_as_a_process_answers_and_stops_cleanly_on_sigterm(
    e2e_stack: Stack, caller: BusClient
) -> None:
    settings = ServiceClientSettings(registry_url=e2e_stack.urls["registry"], tenant_id=TENANT)
    tool = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "hello_tool.py")],
        env=e2e_stack.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with RegistryClient.from_settings(settings) as registry:

            async def registered() -> list[AgentRecord]:
                return (await registry.list_agents(name="hello")).items

            live = await eventually(registered, timeout=60, interval=0.2, what="hello registered")
            answer = await caller.request(
                "hello.requested",
                {"name": "Grace", "language": "de"},
                response_event="hello.answered",
                tenant_id=TENANT,
                wait=60,
            )
            tool.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(tool.wait, 30)
            after = (await registry.list_agents(name="hello")).items
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait(5)

    assert len(live) == 1
    assert answer.data == {"success": True, "result": {"message": "Hallo, Grace!"}}
    assert code == 0
    assert after == []


async def test_the_sequential_worker_example_prices_an_order_item_by_item(e2e_stack: Stack) -> None:
    worker = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "sequential_worker.py")],
        env=e2e_stack.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        asked = await asyncio.to_thread(
            run_example,
            e2e_stack,
            "ask",
            "order.price.requested",
            '{"items": [{"sku": "book", "qty": 2}, {"sku": "pen", "qty": 10}]}',
            "--wait",
            "90",
        )
    finally:
        worker.terminate()
        worker.wait(20)

    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert json.loads(asked.stdout) == {
        "success": True,
        "result": {
            "lines": [{"sku": "book", "amount": 25.0}, {"sku": "pen", "amount": 12.0}],
            "total": {"net": 37.0, "vat": 7.4, "gross": 44.4},
        },
        "task_id": json.loads(asked.stdout)["task_id"],
    }


@pytest.mark.parametrize("moment", ["agent registered", "agent started"])
async def test_ctrl_c_stops_an_example_of_several_agents_quietly_and_deregisters_them(
    e2e_stack: Stack, tmp_path: Path, moment: str
) -> None:
    # At a terminal Ctrl-C signals the whole foreground group, and `uv run` forwards
    # a second SIGINT: the example gets two, 0.2 s apart. It printed a traceback
    # and "Unclosed AIOKafkaConsumer"; now `disco.serve` stops its agents once.
    output = tmp_path / "travel_planner.out"
    with output.open("wb") as out:
        planner = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "travel_planner.py")],
            env=e2e_stack.env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    settings = ServiceClientSettings(registry_url=e2e_stack.urls["registry"], tenant_id=TENANT)
    try:
        await eventually(
            lambda: output.read_text().count(moment) == 2 or planner.poll() is not None,
            timeout=60,
            what=f"both agents to log {moment!r}",
        )
        for press in range(2):
            if press:
                await asyncio.sleep(0.2)
            os.killpg(planner.pid, signal.SIGINT)
        code = await asyncio.to_thread(planner.wait, 30)
        async with RegistryClient.from_settings(settings) as registry:
            left = [
                record.agent_id
                for name in ("trip-planner", "travel-desk")
                for record in (await registry.list_agents(name=name)).items
            ]
    finally:
        if planner.poll() is None:
            planner.kill()
            planner.wait(5)

    text = output.read_text()
    assert code == 0, text
    assert "Traceback" not in text, text
    assert "Unclosed" not in text, text
    assert "KeyboardInterrupt" not in text, text
    assert left == [], text  # both deregistered on the way out


async def test_the_mcp_assistant_uses_the_example_mcp_servers_tools_booking_with_approval(
    e2e_stack: Stack,
) -> None:
    concierge = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "mcp_assistant.py")],
        env=e2e_stack.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        weather = await asyncio.to_thread(
            run_example,
            e2e_stack,
            "ask",
            "concierge.requested",
            '{"text": "What is the weather in Lisbon?"}',
            "--wait",
            "90",
        )
        booking = await ask_in_background(
            e2e_stack, "concierge.requested", '{"text": "Book a table at Tasca at 20:00"}', 120
        )
        await question_waits(e2e_stack, "book_table", what="the booking's approval")
        approved = await asyncio.to_thread(run_example, e2e_stack, "answer", "yes")
        out, err = await asyncio.wait_for(booking.communicate(), 150)
    finally:
        concierge.terminate()
        concierge.wait(20)

    assert weather.returncode == 0, weather.stdout + weather.stderr
    assert json.loads(weather.stdout)["result"] == {"text": "Lisbon: sunny, 24°C."}
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert booking.returncode == 0, err.decode()
    assert json.loads(out)["result"] == {"text": "Booked at Tasca at 20:00: TBL-TAS-2000-2."}
