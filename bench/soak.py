"""The soak: mixed load on the whole stack for SOAK_MINUTES while a chaos schedule runs.

    SOAK_MINUTES=30 make soak        # or: uv run python bench/soak.py --minutes 3

A benchmark, not a test: it starts an embedded PostgreSQL and broker of its own,
the four services and the agents of ``bench/soak_agents.py`` as processes on
loopback, and drives, side by side:

- tool requests on the bus (a Tool whose effect is a journaled step);
- fan-out Worker tasks (three parts each, a step each);
- Planner goals that ask a person (the soak answers the question, as a person would);
- A2A callers through the gateway (``message:send``, then the task until it ends);
- websocket watchers: a turn of an LLM agent in a session, followed live to its end.

Every caller retries what got no answer the way a client would (the same envelope
again: duplicates are skipped by the agents' dedup). Meanwhile a chaos schedule, in
turn: kills an agent process with SIGKILL (its replacement starts), restarts a
service (SIGTERM, start), stalls PostgreSQL for 20 s (SIGSTOP on every process of
it) and restarts the broker (SIGKILL, start). The embedded broker keeps its data in
memory and a restart loses what it held, so the load is paused and drained before
it (under load, only Apache Kafka keeps what a restart would lose); every other
fault happens under load.

Every minute it prints requests and answers per kind, p99 round trips, dead
letters, consumer lag and the RSS and open file descriptors of every process;
at the end, after the load stops and what is pending is answered, the totals:
requests, lost (never answered), effects applied twice (journal lines per
request), dead-lettered. It exits 1 on any loss, on any process whose RSS grew by
more than 20% from the end of the warm-up to the end of the run (processes the
chaos restarted start a new baseline), or on consumer lag that does not drain.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets
from _common import children, percentile, postmaster_pid

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco._dev.status import consumer_lag
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient, TopicReader
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputResponse
from disco_common.topics import DLQ_SUFFIX, Topic

ROOT = Path(__file__).resolve().parents[1]
TENANT = "default"
SERVICES = ("registry", "memory", "tracker", "gateway")
ROLES = ("tools", "fanout", "planner", "assistant")
KINDS = ("tool", "fanout", "planner", "a2a", "ws")
RETRY_SECONDS = 45.0
RETRIES = 4
STALL_SECONDS = 20.0
RSS_GROWTH_LIMIT = 0.20


# -- processes ---------------------------------------------------------------------------


@dataclass
class Proc:
    """One process of the stack: started, killed or restarted by name."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    standby: bool = False

    def launch(self) -> Proc:
        self.process = subprocess.Popen(
            self.args,
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.PIPE if self.standby else self.log.open("ab"),
            stderr=self.log.open("ab"),
            stdin=subprocess.PIPE if self.standby else subprocess.DEVNULL,
        )
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def go(self, timeout: float = 120.0) -> None:
        """Start a standby agent process and wait for its ``ready`` line."""
        assert self.process is not None
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} exited before it was ready (see {self.log})")
            if line.strip() == b"ready":
                self.started_at = time.monotonic()
                # The rest of its output (its log) goes to its log file.
                threading_drain(self.process.stdout, self.log)
                return
        raise TimeoutError(f"{self.name} was not ready within {timeout} s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def threading_drain(stream: Any, log: Path) -> None:
    """Copy what a process writes on ``stream`` to ``log`` (so it never blocks on a full pipe)."""
    import threading

    def drain() -> None:
        with log.open("ab", buffering=0) as kept:
            for line in stream:
                kept.write(line)

    threading.Thread(target=drain, daemon=True).start()


def _wait_http(url: str, proc: Proc, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.process is not None and proc.process.poll() is not None:
            raise RuntimeError(f"{proc.name} exited (see {proc.log})")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{proc.name} was not ready at {url} (see {proc.log})")


@dataclass
class Stack:
    folder: Path
    postgres: EmbeddedPostgres
    broker: EmbeddedBroker
    env: dict[str, str]
    urls: dict[str, str]
    services: dict[str, Proc] = field(default_factory=dict)
    agents: dict[str, Proc] = field(default_factory=dict)
    standbys: dict[str, Proc] = field(default_factory=dict)

    def bus_settings(self) -> BusSettings:
        return BusSettings(
            kafka_bootstrap=self.broker.bootstrap, topic_prefix=self.env["DISCO_TOPIC_PREFIX"]
        )

    def service(self, name: str) -> Proc:
        return Proc(
            name, [sys.executable, "-m", f"disco_{name}"], self.env, self.folder / f"{name}.log"
        )

    def agent(self, role: str, *, standby: bool) -> Proc:
        args = [sys.executable, "bench/soak_agents.py", role, *(["--standby"] if standby else [])]
        return Proc(role, args, self.env, self.folder / f"agent-{role}.log", standby=True)

    def start(self) -> None:
        for name in SERVICES:
            self.services[name] = self.service(name).launch()
        for name in SERVICES:
            _wait_http(self.urls[name], self.services[name])
        for role in ROLES:
            self.agents[role] = self.agent(role, standby=True).launch()
            self.standbys[role] = self.agent(role, standby=True).launch()
        for role in ROLES:
            self.agents[role].go()

    def processes(self) -> dict[str, tuple[int, float]]:
        """name -> (pid, started at) of every process of the stack now."""
        found = {name: (p.pid, p.started_at) for name, p in self.services.items()}
        found |= {f"agent:{role}": (p.pid, p.started_at) for role, p in self.agents.items()}
        if self.broker.pid is not None:
            found["broker"] = (self.broker.pid, self.broker_started)
        postmaster = postmaster_pid(self.postgres)
        if postmaster is not None:
            found["postgres"] = (postmaster, 0.0)
        return found

    broker_started: float = 0.0

    def stop(self) -> None:
        for proc in [*self.agents.values(), *self.standbys.values()]:
            proc.stop()
        for proc in reversed(list(self.services.values())):
            proc.stop()


def build_stack(folder: Path) -> Stack:
    postgres = EmbeddedPostgres(
        data_dir=folder / "pg", port=free_port(), log_path=folder / "pg.log", durable=False
    )
    postgres.start()
    try:
        postgres.create_database("disco")
        admin = with_database(postgres.dsn(), "disco")
        app = with_user(admin, "disco_app", "disco_app")
        upgrade(admin, app)
        broker = EmbeddedBroker(port=free_port(), log_path=folder / "broker.log")
        broker.start()
    except BaseException:
        postgres.destroy()  # nothing of a stack that did not start is left running
        raise
    ports = {name: free_port() for name in SERVICES}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    env = {
        **os.environ,
        "DISCO_ENV": "dev",
        "DISCO_HOST": "127.0.0.1",
        "DISCO_DATABASE_URL": app,
        "DISCO_KAFKA_BOOTSTRAP": broker.bootstrap,
        "DISCO_TOPIC_PREFIX": f"soak{uuid.uuid4().hex[:6]}.",
        "DISCO_TENANT_ID": TENANT,
        "DISCO_KAFKA_SESSION_TIMEOUT_MS": "6000",
        "DISCO_KAFKA_HEARTBEAT_INTERVAL_MS": "1500",
        "DISCO_LOG_LEVEL": "WARNING",
        "DISCO_LOG_JSON": "true",
        "DISCO_SOAK_JOURNAL_DIR": str(folder),
        "DISCO_GATEWAY_PUBLIC_URL": urls["gateway"],
        "PYTHONPATH": str(ROOT),
        **{f"DISCO_{name.upper()}_PORT": str(port) for name, port in ports.items()},
        **{f"DISCO_{name.upper()}_URL": url for name, url in urls.items()},
    }
    stack = Stack(folder, postgres, broker, env, urls)
    stack.broker_started = time.monotonic()
    return stack


# -- what was asked and answered ---------------------------------------------------------


@dataclass
class Pending:
    kind: str
    envelope: Envelope | None
    first_sent: float
    last_sent: float
    tries: int = 1


@dataclass
class Tally:
    """Requests and answers per kind and minute, round trips, what is pending."""

    started: float = field(default_factory=time.monotonic)
    pending: dict[str, Pending] = field(default_factory=dict)
    sent: Counter[tuple[int, str]] = field(default_factory=Counter)
    answered: Counter[tuple[int, str]] = field(default_factory=Counter)
    latencies: dict[tuple[int, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    resent: int = 0
    total_sent: Counter[str] = field(default_factory=Counter)
    total_answered: Counter[str] = field(default_factory=Counter)

    def minute(self) -> int:
        return int((time.monotonic() - self.started) // 60)

    def ask(self, key: str, kind: str, envelope: Envelope | None = None) -> None:
        now = time.monotonic()
        self.pending[key] = Pending(kind, envelope, now, now)
        self.sent[(self.minute(), kind)] += 1
        self.total_sent[kind] += 1

    def answer(self, key: str) -> None:
        pending = self.pending.pop(key, None)
        if pending is None:
            return  # answered already (a duplicate answer), or not ours
        self.answered[(self.minute(), pending.kind)] += 1
        self.total_answered[pending.kind] += 1
        self.latencies[(self.minute(), pending.kind)].append(time.monotonic() - pending.first_sent)


# -- load ---------------------------------------------------------------------------------


class Soak:
    def __init__(self, stack: Stack, rate: float, watchers: int) -> None:
        self.stack = stack
        self.rate = rate
        self.watchers = watchers
        self.tally = Tally()
        self.running = asyncio.Event()
        self.running.set()
        self.stopping = False
        self.dead_letters: Counter[str] = Counter()
        self.dead_letter_reasons: Counter[tuple[str, str, str]] = Counter()
        """(topic, group, error type) -> how many, with :attr:`dead_letter_samples`."""
        self.dead_letter_samples: dict[tuple[str, str, str], str] = {}
        self.plans: set[str] = set()
        self.answered_questions: set[str] = set()
        self.token = mint_dev_token(DEV_AUTH_SECRET, TENANT, "soak", [Role.USER, Role.OPERATOR])
        self.tasks: list[asyncio.Task[None]] = []
        self.a2a_outcomes: Counter[str] = Counter()
        """How A2A calls that got no successful answer ended, by reason (the lost ones)."""
        self.a2a_trails: dict[str, list[str]] = {}
        """What each A2A call was answered, in order (printed for the lost ones)."""

    # the bus side

    async def _requests(self, bus: BusClient, kind: str, event_type: str, rate: float) -> None:
        n = 0
        while not self.stopping:
            await self.running.wait()
            n += 1
            data: dict[str, Any] = {"n": n}
            if kind == "planner":
                data = {"city": "Atlantis"}
            try:
                request = await bus.request(
                    event_type, data, response_event=f"{event_type}.done", tenant_id=TENANT
                )
            except Exception:
                await asyncio.sleep(1)
                continue
            self.tally.ask(request.correlation_id or request.id, kind, request)
            await asyncio.sleep(random.expovariate(rate))

    async def _answers(self, settings: BusSettings) -> None:
        reader = TopicReader(settings, [Topic.ACTION_RESULTS, Topic.NOTIFICATION_EVENTS])
        await reader.start()
        try:
            while True:
                try:
                    records = await reader.read(timeout=0.5)
                except Exception:
                    await asyncio.sleep(0.5)
                    continue
                for record in records:
                    envelope = record.envelope_or_none()
                    if envelope is None:
                        continue
                    if record.topic.endswith(Topic.ACTION_RESULTS.value):
                        if envelope.correlation_id is not None:
                            self.tally.answer(envelope.correlation_id)
                    elif envelope.type == "notification.human_input":
                        await self._answer_question(envelope)
        finally:
            await reader.stop()

    async def _answer_question(self, question: Envelope) -> None:
        """A person answers the planner's question: yes, by boat."""
        if question.id in self.answered_questions or question.correlation_id is None:
            return
        self.answered_questions.add(question.id)
        with contextlib.suppress(Exception):
            await self.bus.publish(
                Topic.NOTIFICATION_EVENTS,
                "trip.boat.decided",
                HumanInputResponse(answer="yes", request_id=question.id, plan_id=question.plan_id),
                correlation_id=question.correlation_id,
                tenant_id=TENANT,
            )

    async def _resend(self) -> None:
        """Clients retry: what got no answer in time is sent again, the same envelope."""
        while True:
            await asyncio.sleep(5)
            await self.running.wait()
            now = time.monotonic()
            for pending in list(self.tally.pending.values()):
                if pending.envelope is None or pending.tries > RETRIES:
                    continue
                if now - pending.last_sent < RETRY_SECONDS:
                    continue
                with contextlib.suppress(Exception):
                    await self.bus.publish_envelope(Topic.ACTION_REQUESTS, pending.envelope)
                    pending.tries += 1
                    pending.last_sent = now
                    self.tally.resent += 1

    async def _dead_letters(self, settings: BusSettings) -> None:
        topics = [f"{topic.value}{DLQ_SUFFIX}" for topic in Topic]
        reader = TopicReader(settings, topics)
        await reader.start()
        try:
            while True:
                try:
                    records = await reader.read(timeout=1.0)
                except Exception:
                    await asyncio.sleep(1)
                    continue
                for record in records:
                    self.dead_letters[record.topic] += 1
                    headers = {
                        name: value.decode("utf-8", "replace") for name, value in record.headers
                    }
                    key = (
                        record.topic,
                        headers.get("dlq_consumer_group", "?"),
                        headers.get("dlq_error_type", "?"),
                    )
                    self.dead_letter_reasons[key] += 1
                    self.dead_letter_samples.setdefault(
                        key, headers.get("dlq_error_message", "")[:300]
                    )
        finally:
            await reader.stop()

    # the gateway side

    async def _a2a(self, rate: float) -> None:
        url = self.stack.urls["gateway"]
        headers = {"Authorization": f"Bearer {self.token}", "A2A-Version": "1.0"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
            calls: list[asyncio.Task[None]] = []
            n = 0
            while not self.stopping:
                await self.running.wait()
                n += 1
                key = f"a2a-{n}"
                self.tally.ask(key, "a2a")
                calls.append(asyncio.create_task(self._a2a_call(http, key, n)))
                self.tasks.append(calls[-1])
                await asyncio.sleep(random.expovariate(rate))
            # The load stopped: the calls under way go on to their end, and their client
            # with them (closing it under them made them fail as if the gateway lost them).
            await asyncio.gather(*calls, return_exceptions=True)

    async def _a2a_call(self, http: httpx.AsyncClient, key: str, n: int) -> None:
        try:
            await self._a2a_exchange(http, key, n)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a lost call says why, whatever it was
            self.a2a_trails.setdefault(key, []).append(f"raised {exc!r}")
            self.a2a_outcomes[f"raised {type(exc).__name__}"] += 1

    async def _a2a_exchange(self, http: httpx.AsyncClient, key: str, n: int) -> None:
        trail = self.a2a_trails.setdefault(key, [])
        message = {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"n": n}}],
            }
        }
        task_id: str | None = None
        deadline = time.monotonic() + RETRY_SECONDS * RETRIES
        while time.monotonic() < deadline:
            try:
                if task_id is None:
                    answer = await http.post("/a2a/soak-tool/message:send", json=message)
                else:
                    answer = await http.get(f"/a2a/soak-tool/tasks/{task_id}")
            except httpx.HTTPError as exc:
                trail.append(f"{'send' if task_id is None else 'get'}: {exc!r}")
                await asyncio.sleep(2)  # the gateway restarts: try again
                continue
            if not trail or not trail[-1].startswith(f"get {answer.status_code}"):
                what = "send" if task_id is None else "get"
                trail.append(f"{what} {answer.status_code}: {answer.text[:300]}")
            if answer.status_code >= 500 or answer.status_code == 429:
                await asyncio.sleep(2)
                continue
            body = answer.json()
            task = body.get("task", body) if isinstance(body, dict) else {}
            state = str((task.get("status") or {}).get("state", ""))
            if "message" in body or state.endswith(("COMPLETED", "completed")):
                self.tally.answer(key)
                del self.a2a_trails[key]
                return
            if state.endswith(("FAILED", "failed", "REJECTED", "CANCELED")):
                # An answer, but not a success: left pending, counted as lost.
                self.a2a_outcomes[f"{state}: {json.dumps(task.get('status'))[:300]}"] += 1
                return
            if answer.status_code >= 400:
                self.a2a_outcomes[f"HTTP {answer.status_code} (retried)"] += 1
                await asyncio.sleep(2)
                continue
            task_id = task.get("id") or task_id
            await asyncio.sleep(1)
        self.a2a_outcomes["no final state in time"] += 1

    async def _watcher(self, index: int) -> None:
        url = self.stack.urls["gateway"]
        ws_base = url.replace("http://", "ws://")
        while not self.stopping:
            await self.running.wait()
            session = f"soak-{index}-{uuid.uuid4().hex[:8]}"
            key = f"ws-{session}"
            self.tally.ask(key, "ws")
            await self._follow_turn(url, ws_base, session, key)
            await asyncio.sleep(random.uniform(1, 3))

    async def _follow_turn(self, url: str, ws_base: str, session: str, key: str) -> None:
        last: str | None = None
        sent = False
        deadline = time.monotonic() + RETRY_SECONDS * RETRIES
        while time.monotonic() < deadline:
            query = f"?after={last}" if last else ""
            try:
                async with websockets.connect(
                    f"{ws_base}/v1/sessions/{session}/stream{query}",
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                ) as ws:
                    if not sent:
                        async with httpx.AsyncClient(timeout=30) as http:
                            posted = await http.post(
                                f"{url}/v1/sessions/{session}/messages",
                                json={"agent": "soak-assistant", "text": "weather in Oslo"},
                                headers={"Authorization": f"Bearer {self.token}"},
                            )
                        if posted.status_code != 202:
                            await asyncio.sleep(2)
                            continue
                        sent = True
                    while time.monotonic() < deadline:
                        raw = await asyncio.wait_for(ws.recv(), timeout=RETRY_SECONDS)
                        message = json.loads(raw)
                        if message.get("id"):
                            last = message["id"]
                        payload = message.get("payload") or {}
                        if message.get("type") == "agent.status" and payload.get("status") in (
                            "completed",
                            "failed",
                        ):
                            if payload.get("status") == "completed":
                                self.tally.answer(key)
                            return
            except (OSError, TimeoutError, websockets.WebSocketException, httpx.HTTPError):
                await asyncio.sleep(2)

    # the run

    async def start_load(self) -> None:
        settings = self.stack.bus_settings()
        self.bus = BusClient(settings, name="soak-load")
        await self.bus.start()
        await self.bus.ensure_topics()
        starts: list[Callable[[], Any]] = [
            lambda: self._requests(self.bus, "tool", "soak.tool.requested", self.rate),
            lambda: self._requests(self.bus, "fanout", "soak.fanout.requested", self.rate / 4),
            lambda: self._requests(self.bus, "planner", "trip.requested", self.rate / 10),
            lambda: self._answers(settings),
            lambda: self._resend(),
            lambda: self._dead_letters(settings),
            lambda: self._a2a(self.rate / 4),
            *[lambda i=i: self._watcher(i) for i in range(self.watchers)],
        ]
        self.tasks += [asyncio.create_task(start()) for start in starts]

    async def stop_load(self) -> None:
        self.stopping = True

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.bus.stop()


# -- chaos ---------------------------------------------------------------------------------


async def kill_agent(stack: Stack, role: str) -> str:
    stack.agents[role].kill()
    replacement = stack.standbys[role]
    await asyncio.to_thread(replacement.go)
    stack.agents[role] = replacement
    stack.standbys[role] = stack.agent(role, standby=True).launch()
    return f"kill -9 agent {role}"


async def restart_service(stack: Stack, name: str) -> str:
    stack.services[name].stop()
    stack.services[name] = stack.service(name).launch()
    await asyncio.to_thread(_wait_http, stack.urls[name], stack.services[name])
    return f"restart service {name}"


async def stall_postgres(stack: Stack) -> str:
    postmaster = postmaster_pid(stack.postgres)
    assert postmaster is not None
    pids = [postmaster, *children(postmaster)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(STALL_SECONDS)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    return f"stall postgres {STALL_SECONDS:.0f} s"


async def restart_broker(stack: Stack, soak: Soak) -> str:
    soak.running.clear()  # drained first: the embedded broker loses what it holds
    drained = await _until(lambda: not soak.tally.pending, 120)
    if stack.broker.pid is not None:
        os.kill(stack.broker.pid, signal.SIGKILL)
    stack.broker.stop()
    stack.broker.start()
    stack.broker_started = time.monotonic()
    async with BusClient(stack.bus_settings(), name="soak-provision") as bus:
        await bus.ensure_topics()
    soak.running.set()
    return f"kill -9 broker and restart ({'drained' if drained else 'not drained'} first)"


async def _until(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.5)
    return predicate()


async def chaos(stack: Stack, soak: Soak, start_after: float, every: float, log: list[str]) -> None:
    await asyncio.sleep(start_after)
    agents = list(ROLES)
    services = list(SERVICES)
    step = 0
    while True:
        kind = step % 4
        try:
            if kind == 0:
                done = await kill_agent(stack, agents[(step // 4) % len(agents)])
            elif kind == 1:
                done = await restart_service(stack, services[(step // 4) % len(services)])
            elif kind == 2:
                done = await stall_postgres(stack)
            else:
                done = await restart_broker(stack, soak)
        except Exception as exc:
            done = f"chaos step failed: {exc!r}"
        line = f"  chaos at {time.monotonic() - soak.tally.started:6.0f} s: {done}"
        print(line, flush=True)
        log.append(line)
        step += 1
        await asyncio.sleep(every)


# -- measuring ---------------------------------------------------------------------------


def rss_and_fds(pid: int) -> tuple[float, int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None
    return rss / 1024, fds


@dataclass
class Sample:
    minute: int
    at: float
    rows: dict[str, tuple[int, float, int]]
    """name -> (pid, RSS MiB, open fds)."""
    lag: int | None
    started: dict[int, float] = field(default_factory=dict)
    """pid -> when the process started (monotonic; 0: before the soak)."""


async def lag_total(settings: BusSettings) -> int | None:
    try:
        return sum(group.total for group in await consumer_lag(settings))
    except Exception:
        return None


def measure(stack: Stack) -> tuple[dict[str, tuple[int, float, int]], dict[int, float]]:
    rows: dict[str, tuple[int, float, int]] = {}
    started: dict[int, float] = {}
    for name, (pid, since) in stack.processes().items():
        measured = rss_and_fds(pid)
        if measured is not None:
            rows[name] = (pid, *measured)
            started[pid] = since
    return rows, started


def print_minute(soak: Soak, minute: int, sample: Sample) -> None:
    tally = soak.tally
    parts = []
    for kind in KINDS:
        sent, answered = tally.sent[(minute, kind)], tally.answered[(minute, kind)]
        latencies = tally.latencies.get((minute, kind)) or []
        p99 = f"{percentile(latencies, 0.99):.1f}" if latencies else "-"
        parts.append(f"{kind} {sent}/{answered} p99 {p99} s")
    lag = "?" if sample.lag is None else str(sample.lag)
    print(
        f"minute {minute + 1:>3}: " + "; ".join(parts) + f"; dead letters "
        f"{sum(soak.dead_letters.values())}; lag {lag}",
        flush=True,
    )
    for name, (pid, rss, fds) in sorted(sample.rows.items()):
        print(f"    {name:<16} pid {pid:>7}  RSS {rss:7.1f} MiB  fds {fds:>4}", flush=True)


async def observe(stack: Stack, soak: Soak, samples: list[Sample]) -> None:
    settings = stack.bus_settings()
    minute = 0
    while True:
        await asyncio.sleep(60 - ((time.monotonic() - soak.tally.started) % 60))
        rows, started = measure(stack)
        sample = Sample(minute, time.monotonic(), rows, await lag_total(settings), started)
        samples.append(sample)
        print_minute(soak, minute, sample)
        minute += 1


def effects_twice(folder: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for journal in folder.glob("*.journal"):
        lines = Counter(journal.read_text().splitlines())
        found[journal.stem] = sum(1 for count in lines.values() if count > 1)
    return found


UNCHECKED = ("broker", "postgres")
"""Processes whose memory holds data by design (the embedded broker keeps every record in
memory; PostgreSQL its buffers): shown, not checked for growth."""


def rss_growth(samples: list[Sample], warmup_end: float, warmup_seconds: float) -> list[str]:
    """disco's processes whose RSS grew past the limit between their baseline (the end of
    the warm-up, or a warm-up after a process the chaos restarted started) and the end."""
    by_pid: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    started: dict[int, float] = {}
    for sample in samples:
        started |= sample.started
        for name, (pid, rss, _) in sample.rows.items():
            if name not in UNCHECKED:
                by_pid[(name, pid)].append((sample.at, rss))
    grown = []
    for (name, pid), points in by_pid.items():
        since = max(warmup_end, started.get(pid, 0.0) + warmup_seconds)
        baseline = next((rss for at, rss in points if at >= since), None)
        if baseline is None or points[-1][0] <= since:
            continue
        last = points[-1][1]
        if baseline > 0 and (last - baseline) / baseline > RSS_GROWTH_LIMIT:
            grown.append(f"{name} (pid {pid}): {baseline:.0f} -> {last:.0f} MiB")
    return grown


async def run(minutes: float, rate: float, watchers: int, warmup_seconds: float) -> int:
    folder = Path(tempfile.mkdtemp(prefix="disco-soak-"))
    print(f"soak: {minutes:g} min, logs and journals in {folder}", flush=True)
    # SIGTERM (and Ctrl-C) end the run through the cleanup below.
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    stack = await asyncio.to_thread(build_stack, folder)
    soak: Soak | None = None
    try:
        await asyncio.to_thread(stack.start)
        soak = Soak(stack, rate, watchers)
        await soak.start_load()
        samples: list[Sample] = []
        chaos_log: list[str] = []
        duration = minutes * 60
        # Sixteen steps over the run (each kind four times), whatever its length; the steps
        # take their own time too (a restart waits for readiness, a stall 20 s).
        every = max(5.0, (duration - warmup_seconds) / 16)
        background = [
            asyncio.create_task(observe(stack, soak, samples)),
            asyncio.create_task(chaos(stack, soak, warmup_seconds, every, chaos_log)),
        ]
        warmup_end = soak.tally.started + warmup_seconds
        await asyncio.sleep(duration)
        background[1].cancel()
        await asyncio.gather(background[1], return_exceptions=True)
        soak.running.set()
        await soak.stop_load()
        print("load stopped: waiting for what is pending and for the lag to drain", flush=True)
        await _until(lambda: not soak.tally.pending, 240)
        settings = stack.bus_settings()
        drained = False
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if (await lag_total(settings)) == 0:
                drained = True
                break
            await asyncio.sleep(2)
        background[0].cancel()
        await asyncio.gather(background[0], return_exceptions=True)
        final_rows, final_started = measure(stack)
        samples.append(
            Sample(
                len(samples), time.monotonic(), final_rows, await lag_total(settings), final_started
            )
        )
        lost = Counter(pending.kind for pending in soak.tally.pending.values())
        twice = effects_twice(folder)
        grown = rss_growth(samples, warmup_end, warmup_seconds)
        print("\nsoak summary")
        print(f"  requests  {dict(soak.tally.total_sent)} (resent {soak.tally.resent})")
        print(f"  answered  {dict(soak.tally.total_answered)}")
        print(f"  lost      {sum(lost.values())} {dict(lost)}")
        if soak.a2a_outcomes:
            print(
                "  A2A calls without a successful answer, by how they ended: "
                f"{dict(soak.a2a_outcomes)}"
            )
        for key in sorted(k for k in soak.tally.pending if k in soak.a2a_trails):
            print(f"    {key}: " + " | ".join(soak.a2a_trails[key][-6:]))
        print(f"  effects twice (requests whose effect ran more than once) {twice}")
        print(f"  dead-lettered {sum(soak.dead_letters.values())} {dict(soak.dead_letters)}")
        for (topic, group, error), count in soak.dead_letter_reasons.most_common(10):
            sample = soak.dead_letter_samples.get((topic, group, error), "")
            print(f"    {count} on {topic} by {group}: {error}: {sample}")
        print(f"  lag drained {drained}")
        print(f"  RSS grown > {RSS_GROWTH_LIMIT:.0%} after warm-up: {grown or 'none'}")
        print(f"  chaos: {len(chaos_log)} steps")
        failed = bool(lost) or bool(grown) or not drained
        print("soak FAILED" if failed else "soak passed", flush=True)
        return 1 if failed else 0
    finally:
        # Every process the soak started goes, whatever failed before.
        if soak is not None:
            with contextlib.suppress(Exception):
                await soak.close()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(stack.stop)
        with contextlib.suppress(Exception):
            stack.broker.stop()
        stack.postgres.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 30)))
    parser.add_argument("--rate", type=float, default=4.0, help="tool requests per second")
    parser.add_argument("--watchers", type=int, default=3, help="websocket watchers")
    parser.add_argument("--warmup-seconds", type=float, default=None)
    args = parser.parse_args()
    warmup = args.warmup_seconds
    if warmup is None:
        warmup = min(120.0, args.minutes * 60 / 6)
    sys.exit(asyncio.run(run(args.minutes, args.rate, args.watchers, warmup)))


if __name__ == "__main__":
    main()
