"""What the benchmarks share: percentiles, a scratch database, waiting for a service."""

from __future__ import annotations

import asyncio
import subprocess
import time

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
