"""The whole local stack: Postgres, the broker, migrations, topics, four services.

``disco dev up`` runs it in the foreground (Ctrl-C stops everything, in order)
or detached; ``disco dev down`` stops a stack from its pid file;
``disco dev status`` says what runs. State lives under ``.disco/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import redact
from disco._dev.errors import DevStackError, EmbeddedStartError
from disco._dev.migrate import upgrade
from disco._dev.ports import ensure_port_free
from disco._dev.postgres import EmbeddedPostgres
from disco._dev.progress import Steps
from disco._dev.services import installed_services
from disco._dev.settings import DevSettings
from disco._dev.signals import StopSignals, launching
from disco_common.services import ServiceManifest

__all__ = ["DevStack", "StackState", "read_state", "stop_from_state"]

STATE_FILE = "stack.json"
CARD_KEY_FILE = "card-signing-key.pem"
"""The key the dev gateway signs agent cards with (kept beside the stack's data)."""
DEV_GRPC_PORT = 8090
"""Where the dev gateway serves the A2A gRPC binding (``DISCO_GATEWAY_GRPC_PORT`` overrides)."""
_READY_TIMEOUT_SECONDS = 90.0


@dataclass
class ServiceProcess:
    """One service started by the stack."""

    name: str
    port: int
    pid: int
    log: str
    module: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def marker(self) -> str:
        """What its command line contains (``python -m <module>``)."""
        return self.module or f"disco_{self.name}"


@dataclass
class StackState:
    """What ``.disco/stack.json`` records, so another process can stop the stack."""

    owner_pid: int
    started_at: float
    postgres_data_dir: str | None = None
    broker_pid: int | None = None
    broker_bootstrap: str = ""
    database_url: str = ""
    services: list[ServiceProcess] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> StackState:
        raw: dict[str, Any] = json.loads(text)
        services = [ServiceProcess(**item) for item in raw.pop("services", [])]
        return cls(**raw, services=services)


def _pid_runs(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive and its command line contains ``marker``.

    The marker guards against signalling an unrelated process that reused a pid.
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return marker in cmdline


def _terminate(pid: int, marker: str, grace: float = 10.0) -> None:
    if not _pid_runs(pid, marker):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _pid_runs(pid, marker):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


class DevStack:
    """Starts and stops the local stack described by ``settings``."""

    def __init__(
        self,
        settings: DevSettings,
        *,
        services: Sequence[ServiceManifest] | None = None,
        echo: Callable[[str], None] = print,
        steps: Steps | None = None,
    ) -> None:
        self.settings = settings
        # Every installed service is reachable through the environment each one
        # gets (DISCO_<NAME>_URL); only ``services`` are started.
        self.installed = installed_services()
        self.services = list(self.installed if services is None else services)
        self.echo = echo
        self.steps = steps if steps is not None else Steps(echo)
        self.restarts = 0
        self.state_dir = settings.state_dir.resolve()
        self.logs_dir = self.state_dir / "logs"
        self._postgres: EmbeddedPostgres | None = None
        self._broker: EmbeddedBroker | None = None
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._state = StackState(owner_pid=os.getpid(), started_at=time.time())
        self.signals = StopSignals()
        """SIGINT and SIGTERM while the stack is in this process's hands (hold them
        with ``signals.caught()`` from before :meth:`up` to after :meth:`wait`)."""

    # -- up --------------------------------------------------------------

    def up(self) -> StackState:
        """Start everything and wait until every service is ready.

        A Ctrl-C (or SIGTERM) while it starts raises ``KeyboardInterrupt`` once
        what had started is stopped again; more of them cannot break off that stop.
        """
        with self.signals.interrupting():
            return self._up()

    def _up(self) -> StackState:
        existing = read_state(self.state_dir)
        if existing is not None and _stack_alive(existing):
            raise DevStackError(
                f"a stack started by pid {existing.owner_pid} is still running "
                f"(see {self.state_dir / STATE_FILE}); stop it with `disco dev down`"
            )
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._check_service_ports()
            self._start_postgres()
            self._start_broker()
            self._write_state()
            with self.steps.step("migrating the database (disco db upgrade)"):
                upgrade(
                    self.settings.admin_url(),
                    self.settings.app_url(),
                    services=[service.name for service in self.installed],
                )
            with self.steps.step("creating the topics"):
                self._provision_topics()
            # Side by side: each service spends seconds importing and connecting;
            # each step's time runs from the launch of all to its own readiness.
            for service in self.services:
                self._start_service(service)
            for record in self._state.services:
                with self.steps.step(f"starting {record.name} on {record.url}"):
                    self._wait_ready(
                        record.name, self._processes[record.name], record, Path(record.log)
                    )
            self._state.database_url = redact(self.settings.app_url())
            self._write_state()
        except BaseException:
            self.signals.stopping()
            self.down()
            raise
        return self._state

    def _check_service_ports(self) -> None:
        for service in self.services:
            port = self.settings.service_port(service)
            ensure_port_free(
                port, f"The {service.name} service", f"DISCO_{service.name.upper()}_PORT"
            )

    def _start_postgres(self) -> None:
        if self.settings.external_database:
            self.echo(f"using the PostgreSQL server at {redact(self.settings.admin_url())}")
            return
        data_dir = self.state_dir / "pg"
        self._postgres = EmbeddedPostgres(
            data_dir=data_dir,
            port=self.settings.postgres_port,
            log_path=self.logs_dir / "postgres.log",
        )
        with self.steps.step(
            f"starting PostgreSQL on 127.0.0.1:{self.settings.postgres_port} (data in {data_dir})"
        ):
            self._postgres.start()
            self._state.postgres_data_dir = str(data_dir)
            self._postgres.create_database(self.settings.database_name)

    def _start_broker(self) -> None:
        bootstrap = self.settings.bootstrap()
        self._state.broker_bootstrap = bootstrap
        if self.settings.external_kafka:
            self.echo(f"using the Kafka cluster at {bootstrap}")
            return
        self._broker = EmbeddedBroker(
            port=self.settings.kafka_port,
            log_path=self.logs_dir / "broker.log",
            threads=self.settings.kafka_broker_threads,
        )
        with self.steps.step(
            f"starting the Kafka-protocol broker (Tansu, in memory) on {bootstrap}"
        ):
            self._broker.start()
        self._state.broker_pid = self._broker.pid

    def _provision_topics(self) -> None:
        from disco.bus import BusClient
        from disco.settings import BusSettings

        async def provision() -> None:
            settings = BusSettings(
                kafka_bootstrap=self.settings.bootstrap(), topic_prefix=self.settings.topic_prefix
            )
            async with BusClient(settings, source="disco://dev") as bus:
                await bus.ensure_topics()

        asyncio.run(provision())

    def service_env(self, service: ServiceManifest) -> dict[str, str]:
        """The environment ``service`` runs with."""
        env = dict(os.environ)
        env.update(
            {
                "DISCO_ENV": env.get("DISCO_ENV", "dev"),
                "DISCO_DATABASE_URL": self.settings.app_url(),
                "DISCO_KAFKA_BOOTSTRAP": self.settings.bootstrap(),
                "DISCO_TOPIC_PREFIX": self.settings.topic_prefix,
                "DISCO_HOST": "127.0.0.1",
                f"DISCO_{service.name.upper()}_PORT": str(self.settings.service_port(service)),
            }
        )
        for other in self.installed:
            env[f"DISCO_{other.name.upper()}_URL"] = (
                f"http://127.0.0.1:{self.settings.service_port(other)}"
            )
        # The gateway's A2A gRPC binding (the registry's cards name it too).
        env.setdefault("DISCO_GATEWAY_GRPC_PORT", str(DEV_GRPC_PORT))
        if env["DISCO_ENV"] == "dev":
            # A webhook on this machine may take the gateway's push notifications.
            env.setdefault("DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK", "true")
            # The gateway signs its agent cards, as in production, with a key of the stack's.
            if not env.get("DISCO_GATEWAY_CARD_SIGNING_KEY"):
                env.setdefault("DISCO_GATEWAY_CARD_SIGNING_KEY_FILE", str(self._card_key()))
        return env

    def _card_key(self) -> Path:
        """The stack's card signing key (EC P-256), made on first use and kept with its data."""
        path = self.state_dir / CARD_KEY_FILE
        if not path.exists():
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import ec

            pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            self.state_dir.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as key_file:
                key_file.write(pem)
        return path

    def _start_service(self, service: ServiceManifest) -> None:
        port = self.settings.service_port(service)
        log_path = self.logs_dir / f"{service.name}.log"
        with launching(), log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", service.module],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.service_env(service),
                start_new_session=True,
            )
            self._processes[service.name] = process
        record = ServiceProcess(
            name=service.name, port=port, pid=process.pid, log=str(log_path), module=service.module
        )
        self._state.services.append(record)
        self._write_state()

    def _wait_ready(
        self,
        service: str,
        process: subprocess.Popen[bytes],
        record: ServiceProcess,
        log_path: Path,
    ) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
        last = "no answer yet"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    raise EmbeddedStartError(
                        f"The {service} service", log_path, f"exit code {process.returncode}"
                    )
                try:
                    response = client.get(f"{record.url}/readyz")
                    if response.status_code == 200:
                        return
                    last = f"/readyz answered {response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}"
                time.sleep(0.2)
        raise EmbeddedStartError(
            f"The {service} service",
            log_path,
            f"not ready after {_READY_TIMEOUT_SECONDS:.0f}s ({last})",
        )

    def _write_state(self) -> None:
        # Written aside, then renamed over: `disco dev status/down` (and a restart of
        # the broker while it runs) read the file at any moment, never half of it.
        self.state_dir.mkdir(parents=True, exist_ok=True)
        written = self.state_dir / f".{STATE_FILE}.{os.getpid()}"
        written.write_text(self._state.to_json())
        written.replace(self.state_dir / STATE_FILE)

    # -- running ---------------------------------------------------------

    def wait(self) -> int:
        """Block until Ctrl-C/SIGTERM or a service dies; then stop everything.

        The first signal starts the stop; any number after it (a terminal's
        Ctrl-C reaches the stack more than once) wait for it to finish.

        Returns the exit code for the command: 0 on a requested stop, 1 when a
        process of the stack died on its own.
        """
        code = 0
        with self.signals.caught():
            try:
                while not self.signals.requested:
                    if self._broker is not None and not self._broker.is_running():
                        if not self._restart_broker():
                            code = 1
                            break
                        continue
                    dead = self._dead_process()
                    if dead is not None:
                        self.echo(dead)
                        code = 1
                        break
                    time.sleep(0.3)
            finally:
                if not self.signals.by_signal:  # else its handler said so at once
                    self.echo("stopping the stack")
                self.signals.stopping()
                self.down()
        return code

    def _restart_broker(self) -> bool:
        """Start the embedded broker again after it died; whether it came back.

        Its data was in memory: the topics are created again, consumers start
        over from the new, empty partitions (the services reconnect by themselves).
        """
        broker = self._broker
        assert broker is not None
        code = broker.exit_code
        broker.stop()  # closes its log; the process is gone already
        self.restarts += 1
        self.echo(
            f"the broker died (exit code {code}); restarting it on {broker.bootstrap} "
            f"(restart {self.restarts}; its in-memory topics are lost and created again)"
        )
        try:
            with self.steps.step("restarting the Kafka-protocol broker"):
                broker.start()
                self._provision_topics()
        except (DevStackError, OSError) as exc:
            self.echo(f"the broker could not be restarted: {exc}")
            return False
        self._state.broker_pid = broker.pid
        self._write_state()
        return True

    def _dead_process(self) -> str | None:
        for service, process in self._processes.items():
            if process.poll() is not None:
                tail = (
                    (self.logs_dir / f"{service}.log")
                    .read_text(errors="replace")
                    .splitlines()[-15:]
                )
                return (
                    f"{service} exited with code {process.returncode}; its log ends with:\n"
                    + "\n".join(tail)
                )
        if self._postgres is not None and not self._postgres.is_running():
            return f"PostgreSQL stopped; see {self.logs_dir / 'postgres.log'}"
        return None

    # -- down ------------------------------------------------------------

    def down(self) -> None:
        """Stop what this object started, services first. Idempotent.

        The services stop side by side (each finishes its requests and leaves
        its consumer groups on its own), then the broker, then Postgres.
        """
        processes = [self._processes.pop(service) for service in reversed(list(self._processes))]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 10.0
        for process in processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        if self._postgres is not None:
            self._postgres.stop()
            self._postgres = None
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)


def read_state(state_dir: Path) -> StackState | None:
    """The recorded state of a stack under ``state_dir``, if any."""
    path = state_dir / STATE_FILE
    try:
        return StackState.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None


def _stack_alive(state: StackState) -> bool:
    if any(_pid_runs(s.pid, s.marker) for s in state.services):
        return True
    if state.broker_pid is not None and _pid_runs(state.broker_pid, "tansu"):
        return True
    return bool(
        state.postgres_data_dir and (Path(state.postgres_data_dir) / "postmaster.pid").exists()
    )


def stop_from_state(state_dir: Path, echo: Callable[[str], None] = print) -> bool:
    """Stop the stack recorded under ``state_dir`` (``disco dev down``).

    Returns False when there was nothing to stop.
    """
    state = read_state(state_dir)
    if state is None:
        return False
    for service in reversed(state.services):
        if _pid_runs(service.pid, service.marker):
            echo(f"stopping {service.name} (pid {service.pid})")
            _terminate(service.pid, service.marker)
    if state.broker_pid is not None and _pid_runs(state.broker_pid, "tansu"):
        echo(f"stopping the broker (pid {state.broker_pid})")
        _terminate(state.broker_pid, "tansu")
    if state.postgres_data_dir:
        postgres = EmbeddedPostgres(
            data_dir=Path(state.postgres_data_dir),
            port=0,
            log_path=state_dir / "logs" / "postgres.log",
        )
        if postgres.is_running():
            echo("stopping PostgreSQL")
            postgres.stop()
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return True


def status_lines(state_dir: Path) -> list[str]:
    """What ``disco dev status`` prints."""
    state = read_state(state_dir)
    if state is None:
        return ["no stack is running (start one with `disco dev up`)"]
    lines = [f"stack started by pid {state.owner_pid}"]
    if state.postgres_data_dir:
        running = (Path(state.postgres_data_dir) / "postmaster.pid").exists()
        lines.append(f"  postgres   {'up' if running else 'down'}   {state.database_url}")
    broker_up = state.broker_pid is None or _pid_runs(state.broker_pid, "tansu")
    lines.append(f"  kafka      {'up' if broker_up else 'down'}   {state.broker_bootstrap}")
    for service in state.services:
        up = _pid_runs(service.pid, service.marker)
        lines.append(f"  {service.name:<10} {'up' if up else 'down'}   {service.url}")
    return lines
