"""Recovery from infrastructure faults: a stalled database (and the bus's, when present).

Starts the four services as processes on a scratch PostgreSQL and
broker, stops every PostgreSQL process (SIGSTOP) for ``--stall`` seconds
(default 20) while a client keeps asking each service for a database read,
then continues them (SIGCONT) and prints, per service:

- how requests were answered during the stall (503s with the stable shape, or
  anything else) and the slowest answer (the bound the settings give);
- the time from SIGCONT until the first successful request and until
  ``/readyz`` is green again.

When ``bench/faults_bus.py`` (broker restart) and ``bench/credentials.py``
(the durable dedup store's and credential verification's costs) exist, their
``main`` runs after this one, so one run prints every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
from _common import Infra, children, scratch_infra, stop_processes, wait_ready

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token

ROOT = Path(__file__).resolve().parents[1]
# Run after the stall, when present, so one run prints every figure of the issue:
# the broker restart (faults_bus) and the dedup/credential costs (credentials).
_COMPANIONS = ("faults_bus", "credentials")
READS = {
    "registry": "/v1/agents",
    "memory": "/v1/memory/plans",
    "tracker": "/v1/tracker/plans",
    "gateway": "/v1/sessions/bench/events",
}


def _start(name: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", f"disco_{name}"],
            env={**os.environ, **env, f"DISCO_{name.upper()}_PORT": str(port)},
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return process, f"http://127.0.0.1:{port}"


async def _poll(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], stop: asyncio.Event
) -> tuple[Counter[str], float]:
    """Ask ``url`` again and again until ``stop``; how it answered and the slowest answer."""
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    while not stop.is_set():
        began = time.monotonic()
        try:
            response = await http.get(url, headers=headers)
            outcome = str(response.status_code)
            if response.status_code >= 500:
                outcome += f" {response.json().get('error', {}).get('code')}"
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        slowest = max(slowest, time.monotonic() - began)
        outcomes[outcome] += 1
        await asyncio.sleep(0.2)
    return outcomes, slowest


async def _until_ok(http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> float:
    began = time.monotonic()
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if (await http.get(url, headers=headers)).status_code == 200:
                return time.monotonic() - began
        await asyncio.sleep(0.02)


async def database_stall(infra: Infra, stall_seconds: float) -> None:
    if infra.postmaster_pid is None:
        print("database stall: skipped (DISCO_DATABASE_ADMIN_URL names an outside server)")
        return
    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    env = {
        "DISCO_ENV": "dev",
        "DISCO_DATABASE_URL": infra.database_url,
        "DISCO_KAFKA_BOOTSTRAP": infra.bootstrap,
        "DISCO_TOPIC_PREFIX": f"bench-faults-{os.getpid()}.",
        "DISCO_LOG_LEVEL": "WARNING",
        "DISCO_LOG_JSON": "true",
    }
    started = {name: _start(name, env, logs / f"disco-bench-faults-{name}.log") for name in READS}
    processes = [process for process, _ in started.values()]
    try:
        for name, (process, url) in started.items():
            await wait_ready(name, url, process, 120)
        headers = {"Authorization": f"Bearer {mint_dev_token(DEV_AUTH_SECRET, 'acme', 'a')}"}
        async with httpx.AsyncClient(timeout=120) as http:
            stop = asyncio.Event()
            pids = [infra.postmaster_pid, *children(infra.postmaster_pid)]
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            try:
                polls = {
                    name: asyncio.create_task(_poll(http, f"{url}{READS[name]}", headers, stop))
                    for name, (_, url) in started.items()
                }
                await asyncio.sleep(stall_seconds)  # the fault's length, not a wait for it
                stop.set()
                during = {name: await task for name, task in polls.items()}
            finally:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            recovered = await asyncio.gather(
                *(_until_ok(http, f"{url}{READS[n]}", headers) for n, (_, url) in started.items())
            )
            green = await asyncio.gather(
                *(_until_ok(http, f"{url}/readyz", {}) for _, url in started.values())
            )
    finally:
        stop_processes(processes)
    print(f"database stalled {stall_seconds:.0f} s (SIGSTOP of every PostgreSQL process):")
    print(
        f"  {'service':<9} {'answers during the stall':<34} {'slowest':>8} "
        f"{'first 200':>10} {'readyz green':>13}"
    )
    for (name, (outcomes, slowest)), ok, ready in zip(
        during.items(), recovered, green, strict=True
    ):
        answers = ", ".join(f"{count}x {what}" for what, count in outcomes.most_common())
        print(f"  {name:<9} {answers:<34} {slowest:>7.2f}s {ok:>9.2f}s {ready:>12.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stall", type=float, default=20.0, help="seconds the database stalls")
    parser.add_argument("--quick", action="store_true", help="a 5 s stall")
    args, _ = parser.parse_known_args()
    with scratch_infra("faults") as infra:
        asyncio.run(database_stall(infra, 5.0 if args.quick else args.stall))
    for module in _COMPANIONS:
        try:
            companion = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            print(f"\n(bench/{module}.py is not here: its figures are not part of this run)")
        else:
            companion.main()


if __name__ == "__main__":
    main()
