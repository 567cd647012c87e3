"""Ctrl-C on ``make dev`` stops the whole stack, every time.

At a terminal the interrupt reaches ``disco dev up`` more than once within a
fraction of a second (the terminal signals the whole foreground group, and uv
forwards it too). A second SIGINT that landed after the stop had begun used to
break it off half way: the services, the broker and Postgres kept their ports
(1 try in 4, by hand). Here a person presses Ctrl-C twice, 0.2 s apart, on a
running ``make dev``, twenty times in a row; after each, every process the stack
had started is gone and every one of its ports is free.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from disco._dev.stack import STATE_FILE
from tests.fixtures.devstack import (
    MakeDev,
    alive,
    dev_env,
    dev_state_dir,
    port_listens,
    ports,
    postgres_processes,
    stack_processes,
)
from tests.fixtures.waiting import wait_until

ROUNDS = 20

# Each round is a whole stack started and stopped (about 10 s on a quiet two-core
# machine, 15-25 s under the suite's load): the suite's 300 s bound for one test
# does not fit twenty of them; a minute per round does.
pytestmark = pytest.mark.timeout(ROUNDS * 60)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """The stack's data, kept across rounds (Postgres's is made once)."""
    with dev_state_dir("disco-ctrl-c-") as folder:
        yield folder


def test_ctrl_c_twice_on_make_dev_stops_every_process_and_frees_every_port(
    tmp_path: Path, state_dir: Path
) -> None:
    timings: list[str] = []
    for round_ in range(1, ROUNDS + 1):
        env = dev_env(state_dir)  # new free ports each round: a freed one may be taken since
        started = time.monotonic()
        stack = MakeDev(env, tmp_path / f"make-dev-{round_}.out")
        try:
            stack.wait_ready()
            up = time.monotonic()
            processes = stack_processes(stack.process.pid, state_dir)
            stack.interrupt(times=2, apart=0.2)
            stack.wait(timeout=90)
            stopped = time.monotonic()
            text = stack.text()
            left = sorted(p.command for p in processes if alive(p))
            listening = sorted(name for name, port in ports(env).items() if port_listens(port))

            assert not left, f"round {round_}: still running: {left}\n{text}"
            assert not listening, f"round {round_}: still listening: {listening}\n{text}"
            assert not (state_dir / STATE_FILE).exists(), f"round {round_}: stop not finished"
            # The second Ctrl-C reached the stack while it was stopping (else the
            # round did not test anything), and did not break the stop off.
            assert "still stopping the stack" in text, f"round {round_}:\n{text}"
            assert "Traceback" not in text, f"round {round_}:\n{text}"
            # Every part of the stack was among what the test watched.
            commands = " ".join(p.command for p in processes)
            for part in ("disco_gateway", "disco_registry", "disco_memory", "disco_tracker"):
                assert part in commands, f"round {round_}: {part} not seen in {commands}"
            assert "tansu" in commands, commands
            assert "postgres" in commands, commands
        finally:
            stack.stop()
        timings.append(f"{up - started:.1f}+{stopped - up:.1f}s")
    print(f"{ROUNDS} rounds (up+stop): {', '.join(timings)}")


@pytest.mark.parametrize(
    "moment",
    [
        "✓ starting PostgreSQL",  # the broker, migrations and topics next
        "✓ creating the topics",  # the services being launched and awaited
    ],
)
def test_ctrl_c_twice_while_make_dev_starts_stops_what_had_started(
    tmp_path: Path, state_dir: Path, moment: str
) -> None:
    env = dev_env(state_dir)
    stack = MakeDev(env, tmp_path / "make-dev.out")
    try:
        wait_until(
            lambda: moment in stack.text() or stack.process.poll() is not None,
            timeout=240,
            interval=0.02,
            what=f"make dev to print {moment!r}",
        )
        processes = stack_processes(stack.process.pid, state_dir)
        stack.interrupt(times=2, apart=0.2)
        stack.wait(timeout=90)
        text = stack.text()
        left = sorted(p.command for p in processes | postgres_processes(state_dir) if alive(p))
        listening = sorted(name for name, port in ports(env).items() if port_listens(port))

        assert "interrupted: what had started is stopped again" in text, text
        assert "disco is up" not in text, text
        assert "Traceback" not in text, text
        assert not left, f"still running: {left}\n{text}"
        assert not listening, f"still listening: {listening}\n{text}"
        assert not (state_dir / STATE_FILE).exists(), text
    finally:
        stack.stop()
