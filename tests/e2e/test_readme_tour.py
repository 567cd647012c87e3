"""README.md's five-minute tour, run as written against a real `make dev` stack.

The commands come from the tour's fenced ``bash`` blocks, so README.md cannot drift
from what works: a command that fails (non-zero exit, or an HTTP answer that is an
error) fails the test. Only the few in :data:`SKIPPED` are left out, each with why.

What the test adds is what a person does without thinking: it starts ``make dev``
(terminal 1) on free ports and points the default addresses the README names
(``localhost:8080`` ...) at them, runs a command that ends with ``&`` in the
background, waits for what a person waits for before the next command (an agent
saying it started, a question showing up), fills ``<plan_id>`` and ``<agent_id>``
in as a person would copy them, and at the end stops everything with Ctrl-C.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from tests.fixtures.devstack import ROOT, MakeDev, dev_env, dev_state_dir
from tests.fixtures.tools import uv_executable
from tests.fixtures.waiting import wait_until

README = ROOT / "README.md"

# The tour is a whole session on a stack of its own: `make dev`, `make demo` and some
# thirty commands, each a Python process (70 s on a quiet machine, 200 s under the
# suite's load): more than the suite's 300 s bound for one test can promise.
pytestmark = pytest.mark.timeout(900)
TOUR_HEADING = "## A five-minute tour"

SKIPPED = {
    "make dev": "terminal 1: the test starts the stack with it, and stops it with Ctrl-C",
    "uv run disco tail": "terminal 2: watches the bus until Ctrl-C",
    "uv run disco plans watch": "watches the tracker live, in another terminal, until Ctrl-C",
}
"""Tour commands not run, by their words (comments dropped), with why."""

DEFAULT_PORTS = {
    8080: "DISCO_GATEWAY_PORT",
    8081: "DISCO_REGISTRY_PORT",
    8082: "DISCO_MEMORY_PORT",
    8083: "DISCO_TRACKER_PORT",
    8090: "DISCO_GATEWAY_GRPC_PORT",
}
_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1):(\d{2,5})\b")
# `NAME=value` or `export NAME=value`, the value one word or a whole `$(...)`.
_ASSIGNMENT = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\$\(.*\)|\S*)")


@dataclass(frozen=True)
class Command:
    """One command of the tour, as README.md writes it (continued lines joined)."""

    text: str
    step: str

    @property
    def words(self) -> str:
        """The command without its comment and extra spaces (what SKIPPED names)."""
        return " ".join(shlex.split(self.text, comments=True))

    @property
    def background(self) -> bool:
        return self.words.endswith("&")


def tour_commands(readme: str) -> list[Command]:
    """Every command in the fenced ``bash`` blocks of the tour's section, in order."""
    start = readme.index(TOUR_HEADING)
    end = readme.find("\n## ", start + len(TOUR_HEADING))
    section = readme[start : end if end != -1 else None]
    commands: list[Command] = []
    step = ""
    in_block = False
    pending = ""
    for line in section.splitlines():
        if not in_block:
            if line.startswith("**"):
                step = line
            in_block = line.strip() == "```bash"
            continue
        if line.strip() == "```":
            in_block = False
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip() and not pending.lstrip().startswith("#"):
            commands.append(Command(pending.strip(), step))
        pending = ""
    return commands


def test_the_tour_is_found_and_every_skipped_command_is_still_in_it() -> None:
    commands = tour_commands(README.read_text())

    assert len(commands) > 20
    words = [command.words for command in commands]
    for skipped in SKIPPED:
        assert skipped in words, f"{skipped!r} is no longer in the tour: drop it from SKIPPED"


@dataclass
class Background:
    """A command the tour runs with ``&``, in a process group of its own."""

    command: Command
    process: subprocess.Popen[bytes]
    output: Path
    out: IO[bytes]

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    @property
    def is_agent(self) -> bool:
        return "python examples/" in self.command.words

    def stop(self) -> int:
        """Ctrl-C, as a person stops it; the exit code."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait(10)
        finally:
            self.out.close()


@dataclass
class Tour:
    """Runs tour commands against the stack whose environment is ``stack_env``."""

    stack_env: dict[str, str]
    logs: Path
    env: dict[str, str] = field(init=False)
    background: list[Background] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        port = self.stack_env
        urls = {
            name: f"http://127.0.0.1:{port[f'DISCO_{name.upper()}_PORT']}"
            for name in ("gateway", "registry", "memory", "tracker")
        }
        # A person's `uv run ...` finds the stack at the default addresses; here the
        # defaults are moved to the stack's ports, and uv is on PATH (as `make dev`
        # makes it for a person).
        uv = uv_executable()
        self.env = {
            **self.stack_env,
            "PATH": f"{Path(uv).parent}{os.pathsep}{os.environ['PATH']}",
            "DISCO_KAFKA_BOOTSTRAP": f"127.0.0.1:{port['DISCO_KAFKA_PORT']}",
            **{f"DISCO_{name.upper()}_URL": url for name, url in urls.items()},
        }
        self.urls = urls

    # -- what a person does around the commands ------------------------------

    def translate(self, text: str) -> str:
        """The command with the default addresses moved to the stack's, placeholders filled."""

        def moved(match: re.Match[str]) -> str:
            variable = DEFAULT_PORTS.get(int(match.group(1)))
            assert variable, f"the tour names port {match.group(1)}: add it to DEFAULT_PORTS"
            return f"127.0.0.1:{self.stack_env[variable]}"

        text = _ADDRESS.sub(moved, text)
        if "<plan_id>" in text:
            text = text.replace("<plan_id>", self._get("tracker", "/v1/tracker/plans")["plan_id"])
        if "<agent_id>" in text:
            agent = self._get("registry", "/v1/agents", name="hello")
            text = text.replace("<agent_id>", agent["agent_id"])
        return text

    def _get(self, service: str, path: str, **params: str) -> dict[str, str]:
        token = mint_dev_token(DEV_AUTH_SECRET, "default", "you", [Role.USER])
        answer = httpx.get(
            f"{self.urls[service]}{path}",
            params={**params, "limit": "1"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        answer.raise_for_status()
        items: list[dict[str, str]] = answer.json()["items"]
        assert items, f"{path}: nothing to copy an id from"
        return items[0]

    def _wait_for_a_question(self) -> None:
        """`disco answer` comes once the question was asked (a person sees it asked)."""

        def waiting() -> bool:
            token = mint_dev_token(DEV_AUTH_SECRET, "default", "you", [Role.USER])
            answer = httpx.get(
                f"{self.urls['tracker']}/v1/tracker/hitl",
                params={"status": "waiting"},
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            return answer.status_code == 200 and bool(answer.json()["items"])

        wait_until(waiting, timeout=120, interval=0.2, what="a question waiting for a person")

    # -- the commands -----------------------------------------------------------

    def run(self, command: Command) -> None:
        text = self.translate(command.text)
        self.ran.append(command.words)
        assignment = _ASSIGNMENT.fullmatch(text.strip())
        if assignment and not command.background:
            self._assign(command, assignment.group(1), text)
        elif command.background:
            self._start(command, text)
        else:
            if command.words.startswith("uv run disco answer"):
                self._wait_for_a_question()
            self._run(command, text)

    def _bash(self, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", script],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def _assign(self, command: Command, name: str, text: str) -> None:
        shown = self._bash(f'{text}\nprintf %s "${name}"', timeout=120)
        assert shown.returncode == 0, self._failed(command, shown.stdout, shown.stderr)
        assert shown.stdout, self._failed(command, "(empty)", shown.stderr)
        self.env[name] = shown.stdout

    def _run(self, command: Command, text: str) -> None:
        done = self._bash(text, timeout=240)
        assert done.returncode == 0, self._failed(command, done.stdout, done.stderr)
        if command.words.startswith("curl"):
            try:
                body = json.loads(done.stdout)
            except ValueError:
                pytest.fail(self._failed(command, done.stdout, "not JSON"))
            refused = isinstance(body, dict) and "error" in body
            assert not refused, self._failed(command, done.stdout, "an error answer")
            if "/.well-known/agent-card.json" in text and "Authorization" not in text:
                # No agent of the tour is public: the gateway's card says so, and how.
                assert "No agent is public" in body["description"], body["description"]
                assert "DISCO_GATEWAY_PUBLIC_AGENTS" in body["description"]

    def _start(self, command: Command, text: str) -> None:
        output = self.logs / f"background-{len(self.background)}.out"
        out = output.open("wb")
        words = shlex.split(text, comments=True)
        process = subprocess.Popen(
            ["bash", "-c", f"exec {shlex.join(words[:-1])}"],  # without its "&"
            env=self.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        job = Background(command, process, output, out)
        self.background.append(job)
        if job.is_agent:
            # A person goes on once the agent says it started.
            def started() -> bool:
                log = job.text()
                if process.poll() is not None:
                    raise AssertionError(self._failed(command, log, "it exited"))
                count = log.count("agent started")
                return count > 0 and count >= log.count("agent registered")

            wait_until(started, timeout=120, interval=0.2, what=f"{command.words} started")

    def _failed(self, command: Command, stdout: str, stderr: str) -> str:
        return (
            f"README.md's tour fails at {command.step.strip()}\n  $ {command.text}\n"
            f"--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}"
        )

    def finish(self) -> None:
        """The `disco ask ... &` end with their answers; the agents stop quietly on Ctrl-C."""
        for job in self.background:
            if not job.is_agent:
                try:
                    code = job.process.wait(180)
                finally:
                    job.out.close()
                assert code == 0, self._failed(job.command, job.text(), f"exit {code}")
        for job in self.background:
            if job.is_agent:
                code = job.stop()
                assert code == 0, self._failed(job.command, job.text(), f"exit {code} on Ctrl-C")
                assert "Traceback" not in job.text(), self._failed(job.command, job.text(), "")

    def abandon(self) -> None:
        for job in self.background:
            if job.process.poll() is None:
                os.killpg(job.process.pid, signal.SIGKILL)
                job.process.wait(10)
            job.out.close()


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """The stack's data (see dev_state_dir)."""
    with dev_state_dir("disco-tour-") as folder:
        yield folder


def test_the_readme_tour_runs_as_written(tmp_path: Path, state_dir: Path) -> None:
    commands = tour_commands(README.read_text())
    stack = MakeDev(dev_env(state_dir), tmp_path / "make-dev.out")
    tour = Tour(stack.env, tmp_path)
    started = time.monotonic()
    try:
        stack.wait_ready()
        for command in commands:
            if command.words in SKIPPED:
                continue
            tour.run(command)
        tour.finish()
    except BaseException:
        tour.abandon()
        raise
    finally:
        stack.interrupt(times=2)
        stack.wait(90)
        stack.stop()
    assert len(tour.ran) == len(commands) - len(SKIPPED)
    print(f"{len(tour.ran)} tour commands in {time.monotonic() - started:.0f} s")
