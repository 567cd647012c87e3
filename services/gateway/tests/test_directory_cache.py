"""The agent directory's cache: one registry call per key, however many requests miss at once."""

from __future__ import annotations

import asyncio

import pytest

from disco_gateway.agents.service import _Cache


async def test_concurrent_misses_of_one_key_share_one_load() -> None:
    cache = _Cache(seconds=60)
    calls = 0
    release = asyncio.Event()

    async def load() -> str:
        nonlocal calls
        calls += 1
        await release.wait()
        return f"answer {calls}"

    waiting = [asyncio.create_task(cache.get("key", load)) for _ in range(20)]
    await asyncio.sleep(0)  # every request is waiting on the load now
    release.set()
    answers = await asyncio.gather(*waiting)
    assert calls == 1
    assert answers == ["answer 1"] * 20
    assert await cache.get("key", load) == "answer 1"  # then served from the cache
    assert calls == 1


async def test_a_cancelled_waiter_does_not_cancel_the_shared_load() -> None:
    cache = _Cache(seconds=60)
    release = asyncio.Event()

    async def load() -> str:
        await release.wait()
        return "answer"

    first = asyncio.create_task(cache.get("key", load))
    second = asyncio.create_task(cache.get("key", load))
    await asyncio.sleep(0)
    first.cancel()
    release.set()
    assert await second == "answer"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_failed_load_reaches_every_waiter_and_the_next_miss_loads_again() -> None:
    cache = _Cache(seconds=60)
    attempts = 0

    async def load() -> str:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0)
        if attempts == 1:
            raise ConnectionError("registry down")
        return "answer"

    results = await asyncio.gather(
        cache.get("key", load), cache.get("key", load), return_exceptions=True
    )
    assert all(isinstance(result, ConnectionError) for result in results)
    assert await cache.get("key", load) == "answer"
    assert attempts == 2


async def test_a_load_begun_before_a_clear_is_not_kept() -> None:
    cache = _Cache(seconds=60)
    release = asyncio.Event()
    loads = 0

    async def load() -> str:
        nonlocal loads
        loads += 1
        number = loads
        if number == 1:
            await release.wait()
        return f"answer {number}"

    before = asyncio.create_task(cache.get("key", load))
    await asyncio.sleep(0)
    cache.clear()  # the agents changed while it was reading them
    after = await cache.get("key", load)
    release.set()
    assert await before == "answer 1"  # it serves who asked before the change
    assert after == "answer 2"
    assert await cache.get("key", load) == "answer 2"  # what is kept is the fresh one
    assert loads == 2
