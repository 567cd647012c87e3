"""The in-process dedup window: bounded in size and in time."""

from __future__ import annotations

from disco.bus import DedupStore, DurableDedupStore, InMemoryDedupStore


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


class Marks:
    """Dedup marks kept in a dict, as the memory service keeps them per group."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str, str], int | None] = {}
        self.lookups = 0

    async def get_dedup_mark(self, group: str, event_id: str) -> object | None:
        self.lookups += 1
        return self.marks.get((group, event_id)) if (group, event_id) in self.marks else None

    async def put_dedup_mark(
        self, group: str, event_id: str, *, ttl_seconds: int | None = None
    ) -> object:
        self.marks.setdefault((group, event_id), ttl_seconds)
        return (group, event_id)


async def test_a_durable_store_sees_what_another_instance_of_its_group_marked() -> None:
    marks = Marks()
    first = DurableDedupStore(marks, "workers", ttl_seconds=90)
    second = DurableDedupStore(marks, "workers")
    other_group = DurableDedupStore(marks, "planners")

    await first.mark("e1")
    await first.flush()

    assert isinstance(first, DedupStore)
    assert await second.seen("e1")
    assert not await other_group.seen("e1")
    assert not await second.seen("e2")
    assert marks.marks == {("workers", "e1"): 90}


async def test_a_durable_store_answers_its_own_marks_without_asking_the_service() -> None:
    marks = Marks()
    store = DurableDedupStore(marks, "workers")

    await store.mark("e1")
    assert await store.seen("e1")

    assert marks.lookups == 0


class Down:
    """Dedup marks whose service does not answer."""

    async def get_dedup_mark(self, group: str, event_id: str) -> object | None:
        raise ConnectionError("memory service down")

    async def put_dedup_mark(
        self, group: str, event_id: str, *, ttl_seconds: int | None = None
    ) -> object:
        raise ConnectionError("memory service down")


async def test_a_durable_store_whose_service_is_down_handles_as_new_and_keeps_going() -> None:
    store = DurableDedupStore(Down(), "workers")

    assert not await store.seen("e1")  # handled, as at-least-once allows
    await store.mark("e1")  # the failed write is logged and dropped
    await store.flush()

    assert await store.seen("e1")  # this process still remembers it
