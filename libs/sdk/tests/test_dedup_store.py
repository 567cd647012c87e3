"""The in-process dedup window: bounded in size and in time."""

from __future__ import annotations

from disco.bus import DedupStore, InMemoryDedupStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_marked_id_is_seen_and_an_unmarked_one_is_not() -> None:
    store = InMemoryDedupStore(max_size=10, ttl_seconds=60)

    await store.mark("a")

    assert await store.seen("a")
    assert not await store.seen("b")


async def test_the_oldest_id_is_forgotten_beyond_the_window_size() -> None:
    store = InMemoryDedupStore(max_size=2, ttl_seconds=60)

    for event_id in ("a", "b", "c"):
        await store.mark(event_id)

    assert [await store.seen(e) for e in ("a", "b", "c")] == [False, True, True]
    assert len(store) == 2


async def test_an_id_is_forgotten_after_its_ttl() -> None:
    clock = Clock()
    store = InMemoryDedupStore(max_size=10, ttl_seconds=5, clock=clock)
    await store.mark("a")

    clock.now += 4.9
    assert await store.seen("a")
    clock.now += 0.2
    assert not await store.seen("a")


async def test_marking_again_refreshes_an_id_so_it_is_evicted_last() -> None:
    store = InMemoryDedupStore(max_size=2, ttl_seconds=60)
    await store.mark("a")
    await store.mark("b")

    await store.mark("a")
    await store.mark("c")

    assert [await store.seen(e) for e in ("a", "b", "c")] == [True, False, True]


async def test_a_window_of_size_zero_remembers_nothing() -> None:
    store = InMemoryDedupStore(max_size=0)

    await store.mark("a")

    assert not await store.seen("a")


def test_the_in_memory_store_satisfies_the_protocol() -> None:
    assert isinstance(InMemoryDedupStore(), DedupStore)
