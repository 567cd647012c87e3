"""Errors a person can act on: one line that says what to do, the traceback only on demand."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from disco import Tool
from disco.bus import BusClient
from disco.settings import BusSettings
from disco.testing import InMemoryMemory
from tests.fixtures.devstack import ROOT, MakeDev, dev_env, dev_state_dir


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """The stack's data (see dev_state_dir)."""
    with dev_state_dir("disco-cli-errors-") as folder:
        yield folder


@pytest.mark.parametrize("debug", [False, True])
def test_make_dev_with_a_busy_port_says_so_in_one_line_and_no_traceback(
    tmp_path: Path, state_dir: Path, debug: bool
) -> None:
    env = dev_env(state_dir)
    if debug:
        env["DISCO_DEBUG"] = "1"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", int(env["DISCO_REGISTRY_PORT"])))
        squatter.listen()
        stack = MakeDev(env, tmp_path / "make-dev.out")
        try:
            code = stack.wait(timeout=120)
        finally:
            stack.stop()
    text = stack.text()
    ours = [line for line in text.splitlines() if not line.startswith(("make", "/"))]

    assert code != 0
    port = env["DISCO_REGISTRY_PORT"]
    if debug:  # the traceback, on demand
        assert "Traceback" in text, text
        assert "PortInUseError" in text, text
        return
    assert ours == [
        f"error: The registry service cannot start: port 127.0.0.1:{port} is already in use "
        "(Address already in use). Stop whatever holds it (`disco dev down` if it is an "
        "earlier stack), or pick another port with DISCO_REGISTRY_PORT=<port>."
    ], text


def _disco(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "disco._cli.main", *args],
        env={**os.environ, **env, "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


class _Name(BaseModel):
    name: str


class _Greeting(BaseModel):
    message: str


async def test_ask_exits_non_zero_when_the_agent_answers_with_an_error(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    tool = Tool("cli-greeter", bus_settings=settings, register=False, memory=InMemoryMemory())

    @tool.on_invoke("cli.greet.requested")
    async def greet(request: _Name) -> _Greeting:
        if request.name == "nobody":
            raise LookupError("nobody is not someone\nto greet")
        return _Greeting(message=f"Hello, {request.name}!")

    env = {"DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap, "DISCO_TOPIC_PREFIX": topic_prefix}
    async with BusClient(settings) as bus:
        await bus.ensure_topics()
    async with tool:
        await tool.wait_ready(30)
        refused = await asyncio.to_thread(
            _disco, "ask", "cli.greet.requested", '{"name": "nobody"}', "--wait", "30", env=env
        )
        invalid = await asyncio.to_thread(
            _disco, "ask", "cli.greet.requested", '{"nom": "Ada"}', "--wait", "30", env=env
        )
        greeted = await asyncio.to_thread(
            _disco, "ask", "cli.greet.requested", '{"name": "Ada"}', "--wait", "30", env=env
        )

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["success"] is False  # the answer itself, as it came
    assert refused.stderr.strip() == (
        "the agent answered with an error: LookupError: nobody is not someone to greet"
    )
    assert invalid.returncode == 1, invalid.stdout + invalid.stderr
    assert invalid.stderr.startswith("the agent answered with an error: "), invalid.stderr
    assert "name" in invalid.stderr
    assert greeted.returncode == 0, greeted.stderr
    assert greeted.stderr == ""


def test_an_error_no_command_words_itself_is_one_line_and_debug_shows_its_traceback(
    tmp_path: Path,
) -> None:
    # A state folder under a file: the stack cannot make its folders (an OSError
    # `disco dev up` has no message of its own for).
    a_file = tmp_path / "file"
    a_file.write_text("")
    env = {"DISCO_STATE_DIR": str(a_file / "state")}

    plain = _disco("dev", "up", env=env)
    flagged = _disco("--debug", "dev", "up", env=env)
    by_variable = _disco("dev", "up", env={**env, "DISCO_DEBUG": "1"})

    assert plain.returncode == 1
    assert plain.stderr.splitlines() == [
        f"error: NotADirectoryError: [Errno 20] Not a directory: '{a_file / 'state' / 'logs'}' "
        "(--debug or DISCO_DEBUG=1 shows the traceback)"
    ], plain.stderr
    for shown in (flagged, by_variable):
        assert shown.returncode == 1
        assert "Traceback" in shown.stderr, shown.stderr
        assert "NotADirectoryError" in shown.stderr
