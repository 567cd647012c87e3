"""What the benchmarks share: percentiles, a scratch database, waiting for a service."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.settings import BusSettings


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank ``fraction`` percentile (0.5 is the median, 0.99 the p99)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def create_database(admin_url: str, name: str) -> None:
    conn = await asyncpg.connect(with_database(admin_url, "postgres"))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def wait_ready(
    what: str, base_url: str, process: subprocess.Popen[bytes], limit_seconds: float
) -> None:
    """Until the service ``process`` serving ``base_url`` answers /readyz with 200."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        deadline = time.monotonic() + limit_seconds
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the {what} exited with {process.returncode}")
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError(f"the {what} did not become ready")


def start_service(
    service: str, database_url: str, bootstrap: str, prefix: str, **settings: str
) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m disco_<service>`` on a free port, on that database, broker and topic
    prefix (more ``DISCO_*`` settings as keywords), its output in the temp dir: the
    process and its base URL. Wait for it with :func:`wait_ready`."""
    port = free_port()
    env = {
        **os.environ,
        "DISCO_DATABASE_URL": database_url,
        "DISCO_KAFKA_BOOTSTRAP": bootstrap,
        "DISCO_TOPIC_PREFIX": prefix,
        f"DISCO_{service.upper()}_PORT": str(port),
        "DISCO_LOG_LEVEL": "WARNING",
        **settings,
    }
    log_path = Path(tempfile.gettempdir()) / f"disco-bench-{service}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", f"disco_{service}"], env=env, stdout=log, stderr=log
        )
    return process, f"http://127.0.0.1:{port}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (Linux ``/proc``; 0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # without guest time, which is counted in user already
    return total - idle, total


class BusyCores:
    """How many of the machine's cores were busy between :meth:`start` and :meth:`stop`."""

    def start(self) -> None:
        self._begin = _machine_ticks()

    def stop(self) -> float:
        busy, total = (b - a for a, b in zip(self._begin, _machine_ticks(), strict=True))
        return (os.cpu_count() or 1) * busy / total if total else 0.0


@dataclass(frozen=True, slots=True)
class LeanResponse:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


@dataclass(frozen=True, slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    head: str  # the request headers every request on it carries


class LeanHttp:
    """A load generator's HTTP/1.1 client: keep-alive connections, nothing else.

    httpx spends about 2 ms of CPU on a request, more than the services it
    measures, and the load generator shares the machine's two cores with them.
    This one only writes a request and reads a ``Content-Length`` response
    (what the disco services send) or a chunked one (a stream that ends with
    the response), so the figures are the server's. A request
    takes a free connection from the pool (opening one while fewer than
    ``connections`` exist, round robin over ``base_urls``) and puts it back
    after the response.
    """

    def __init__(self, base_urls: list[str], headers: dict[str, str], connections: int) -> None:
        self._servers = [httpx.URL(base_url) for base_url in base_urls]
        self._headers = headers
        self._limit = connections
        self._opened = 0
        self._idle: asyncio.Queue[_Connection] = asyncio.Queue()
        self._all: list[asyncio.StreamWriter] = []

    async def _connection(self, *, fresh: bool = False) -> _Connection:
        if fresh or (self._idle.empty() and self._opened < self._limit):
            # Round robin over the servers, as a load balancer would.
            server = self._servers[self._opened % len(self._servers)]
            self._opened += 1
            reader, writer = await asyncio.open_connection(server.host, server.port or 80)
            self._all.append(writer)
            head = "".join(
                f"{k}: {v}\r\n"
                for k, v in {"Host": server.netloc.decode(), **self._headers}.items()
            )
            return _Connection(reader, writer, head)
        return await self._idle.get()

    async def request(self, method: str, path: str, body: bytes = b"") -> LeanResponse:
        for attempt in (1, 2):
            # The retry opens a new connection: the idle ones may all have been closed.
            connection = await self._connection(fresh=attempt == 2)
            try:
                return await self._exchange(connection, method, path, body)
            except (asyncio.IncompleteReadError, ConnectionError):
                # The server closed an idle keep-alive connection: open another, once.
                connection.writer.close()
                self._opened -= 1
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _exchange(
        self, connection: _Connection, method: str, path: str, body: bytes
    ) -> LeanResponse:
        reader, writer = connection.reader, connection.writer
        extra = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n" if body else ""
        writer.write(f"{method} {path} HTTP/1.1\r\n{connection.head}{extra}\r\n".encode() + body)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
            elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if chunked:  # a stream (server-sent events) that ends with the response
            parts: list[bytes] = []
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            await reader.readexactly(2)
            content = b"".join(parts)
        else:
            content = await reader.readexactly(length) if length else b""
        self._idle.put_nowait(connection)
        return LeanResponse(status, content)

    async def json(self, method: str, path: str, value: object = None) -> LeanResponse:
        """A request with ``value`` as its JSON body (none when ``value`` is None)."""
        return await self.request(
            method, path, b"" if value is None else json.dumps(value).encode()
        )

    async def close(self) -> None:
        for writer in self._all:
            writer.close()


# The fetch wait raw aiokafka clients use, per bootstrap: disco's busy wait on that
# broker (what a disco consumer uses while records flow), so raw and disco compare
# at the same settings.
_RAW_WAITS: dict[str, int] = {}


async def raw_fetch_wait(settings: BusSettings) -> int:
    """The fetch wait (ms) of the raw baselines on ``settings``' broker (remembered)."""
    known = _RAW_WAITS.get(settings.kafka_bootstrap)
    if known is None:
        try:
            from disco.bus._polling import broker_kind

            known = settings.fetch_waits(await broker_kind(settings))[0]
        except ImportError:  # an older checkout: one fixed wait for everything
            known = int(getattr(settings, "kafka_fetch_max_wait_ms", 20))
        _RAW_WAITS[settings.kafka_bootstrap] = known
    return known


def known_fetch_wait(settings: BusSettings) -> int:
    """:func:`raw_fetch_wait` once it was awaited for this broker."""
    try:
        return _RAW_WAITS[settings.kafka_bootstrap]
    except KeyError:
        raise RuntimeError("await raw_fetch_wait(settings) first") from None


def describe_fetch(settings: BusSettings) -> str:
    """How disco's consumers pace their fetches with these settings."""
    try:
        from disco.bus._polling import _KINDS
    except ImportError:
        return f"fetch wait {settings.kafka_fetch_max_wait_ms} ms, fixed"
    kind = _KINDS.get(settings.kafka_bootstrap, "kafka")
    low, high = settings.fetch_waits(kind)
    return (
        f"{kind} broker, fetch wait {low} ms while busy .. {high} ms idle "
        f"(backoff ratio {settings.kafka_fetch_backoff_ratio})"
    )


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def postmaster_pid(server: EmbeddedPostgres | None) -> int | None:
    """The embedded server's postmaster pid (its data folder's ``postmaster.pid``)."""
    if server is None:
        return None
    try:
        return int((Path(server.data_dir) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Infra:
    """Where a benchmark's database (fresh, migrated) and broker are."""

    database_url: str
    bootstrap: str
    postmaster_pid: int | None
    broker_pid: int | None = None
    """The embedded broker's process (None: a broker named by ``DISCO_KAFKA_BOOTSTRAP``)."""


@contextlib.contextmanager
def scratch_infra(name: str) -> Iterator[Infra]:
    """An embedded PostgreSQL and Tansu broker on free loopback ports (or the ones
    ``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP`` name), with a fresh database
    migrated to head; stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"disco-bench-{name}-") as scratch:
        folder = Path(scratch)
        server: EmbeddedPostgres | None = None
        broker: EmbeddedBroker | None = None
        try:
            admin_root = os.environ.get("DISCO_DATABASE_ADMIN_URL")
            if admin_root is None:
                server = EmbeddedPostgres(
                    data_dir=folder / "pg",
                    port=free_port(),
                    log_path=folder / "postgres.log",
                    durable=False,
                )
                server.start()
                admin_root = server.dsn("postgres")
            bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
            if bootstrap is None:
                broker = EmbeddedBroker(port=free_port(), log_path=folder / "broker.log")
                broker.start()
                bootstrap = broker.bootstrap
            database = f"disco_bench_{uuid.uuid4().hex[:8]}"
            asyncio.run(create_database(admin_root, database))
            admin = with_database(admin_root, database)
            app = with_user(admin, "disco_app", "disco_app")
            upgrade(admin, app)
            yield Infra(
                app, bootstrap, postmaster_pid(server), broker.pid if broker is not None else None
            )
        finally:
            if broker is not None:
                broker.stop()
            if server is not None:
                server.destroy()


@contextlib.contextmanager
def scratch_broker(name: str) -> Iterator[str]:
    """The bootstrap of an embedded Tansu broker on a free loopback port (or the one
    ``DISCO_KAFKA_BOOTSTRAP`` names); stopped afterwards."""
    bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
    if bootstrap is not None:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix=f"disco-bench-{name}-") as scratch:
        broker = EmbeddedBroker(port=free_port(), log_path=Path(scratch) / "broker.log")
        broker.start()
        try:
            yield broker.bootstrap
        finally:
            broker.stop()


def stop_processes(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process, then wait for each (SIGKILL after 20 s)."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


# -- bare ASGI floors ----------------------------------------------------------------------

BareHandler = Callable[[bytes], Awaitable[tuple[int, bytes]]]
"""A request body -> (status, JSON answer): the whole of a bare floor's route."""


async def serve_bare(port: int, handle: BareHandler) -> None:
    """``handle`` as the one route of a bare ASGI app on uvicorn (httptools, on the running
    loop, as the services run): no framework, middleware or auth. Prints ``ready`` once it
    listens; serves until killed."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        status, content = await handle(body)
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(content)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, loop="none", http="httptools", lifespan="off",
        log_level="warning", access_log=False,
    )  # fmt: skip
    # Listening before uvicorn starts: connections wait in the backlog meanwhile.
    listening = socket.create_server(("127.0.0.1", port))
    print("ready", flush=True)
    await uvicorn.Server(config).serve(sockets=[listening])
