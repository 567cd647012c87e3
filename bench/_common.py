"""What the benchmarks share: percentiles, a scratch database, waiting for a service."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import asyncpg
import httpx

from disco._dev.dburl import with_database


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
