"""The in-process dedup window (bounded in size and in time) and the durable store in
front of the memory service's marks (asked once per batch and tenant, written in batches)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence

from aiokafka.structs import ConsumerRecord

from disco._context import HandlerContext, enter_handler, exit_handler, maybe_current_context
from disco.bus import DedupStore, DurableDedupStore, InMemoryDedupStore
from disco.clients import DedupAnswer
from disco_common.envelope import TENANT_HEADER, BusinessFact


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
    """Dedup marks kept in a dict, as the memory service keeps them per tenant and group."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str | None, str, str], int | None] = {}
        self.questions: list[tuple[str | None, list[str]]] = []
        self.writes: list[tuple[str | None, str | None, list[str]]] = []

    async def check_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> list[str]:
        tenant_id = tenant_id or _context_tenant()
        self.questions.append((tenant_id, list(event_ids)))
        return [e for e in event_ids if (tenant_id, group, e) in self.marks]

    async def put_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> int:
        self.writes.append((tenant_id, user_id, list(event_ids)))
        for event_id in event_ids:
            self.marks.setdefault((tenant_id, group, event_id), ttl_seconds)
        return len(event_ids)


def _context_tenant() -> str | None:
    context = maybe_current_context()
    return context.envelope.tenant_id if context is not None else None


def record(event_id: str, tenant_id: str | None) -> ConsumerRecord[bytes, bytes]:
    headers = [("ce_id", event_id.encode())]
    if tenant_id is not None:
        headers.append((TENANT_HEADER, tenant_id.encode()))
    return ConsumerRecord(
        topic="t", partition=0, offset=0, timestamp=0, timestamp_type=0, key=None,
        value=b"{}", checksum=None, serialized_key_size=0, serialized_value_size=2,
        headers=tuple(headers),
    )  # fmt: skip


@contextlib.contextmanager
def handling(event_id: str, tenant_id: str, user_id: str | None = None) -> Iterator[None]:
    """As the consumer calls the store: inside the envelope's handler context."""
    envelope = BusinessFact(
        id=event_id, source="urn:test", type="x.happened", tenant_id=tenant_id, user_id=user_id
    )
    entered = enter_handler(
        HandlerContext(envelope=envelope, topic="t", partition=0, offset=0, group="workers")
    )
    try:
        yield
    finally:
        exit_handler(entered)


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
    assert marks.marks == {(None, "workers", "e1"): 90}


async def test_a_durable_store_answers_its_own_marks_without_asking_the_service() -> None:
    marks = Marks()
    store = DurableDedupStore(marks, "workers")

    await store.mark("e1")
    assert await store.seen("e1")

    assert marks.questions == []


async def test_a_fetched_batch_is_asked_about_once_per_tenant_before_its_handlers() -> None:
    marks = Marks()
    marks.marks[("acme", "workers", "a2")] = None  # handled before, by another instance
    marks.marks[("globex", "workers", "a2")] = None  # same id, another tenant: not acme's
    store = DurableDedupStore(marks, "workers")
    await store.mark("a0")  # handled by this process

    store.expect([record(f"a{n}", "acme") for n in range(4)] + [record("g1", "globex")])
    seen = {}
    for event_id, tenant in [("a0", "acme"), ("a1", "acme"), ("a2", "acme"), ("g1", "globex")]:
        with handling(event_id, tenant):
            seen[event_id] = await store.seen(event_id)

    assert seen == {"a0": True, "a1": False, "a2": True, "g1": False}
    assert sorted(marks.questions) == [("acme", ["a1", "a2", "a3"]), ("globex", ["g1"])]


async def test_an_envelope_whose_tenant_differs_from_its_header_is_asked_about_alone() -> None:
    marks = Marks()
    marks.marks[("acme", "workers", "e1")] = None
    store = DurableDedupStore(marks, "workers")

    store.expect([record("e1", "acme")])  # the header says acme...
    with handling("e1", "globex"):  # ...the envelope globex: acme's answer is not its
        assert not await store.seen("e1")

    assert marks.questions[-1] == ("globex", ["e1"])


async def test_marks_are_written_a_batch_per_tenant_and_user_while_one_is_in_flight() -> None:
    marks = Marks()
    store = DurableDedupStore(marks, "workers", ttl_seconds=60)

    for n in range(5):
        with handling(f"e{n}", "acme", "ann" if n < 4 else "bob"):
            await store.mark(f"e{n}")
    await store.flush()

    # Marks made before the writer of their tenant and user got to run go in its batch.
    assert marks.writes == [("acme", "ann", ["e0", "e1", "e2", "e3"]), ("acme", "bob", ["e4"])]
    assert len(marks.marks) == 5


class SlowMarks(Marks):
    """Marks whose writes wait until let go."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()
        self.go = asyncio.Event()

    async def put_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> int:
        self.writing.set()
        await self.go.wait()
        return await super().put_dedup_marks(
            group, event_ids, ttl_seconds=ttl_seconds, tenant_id=tenant_id, user_id=user_id
        )


async def test_marks_made_while_a_write_is_in_flight_go_in_the_next_one() -> None:
    marks = SlowMarks()
    store = DurableDedupStore(marks, "workers")

    await store.mark("e0")
    await marks.writing.wait()
    for n in (1, 2, 3):
        await store.mark(f"e{n}")
    marks.go.set()
    await store.flush()

    assert marks.writes == [(None, None, ["e0"]), (None, None, ["e1", "e2", "e3"])]


async def test_a_full_queue_of_marks_makes_the_next_mark_wait_for_room() -> None:
    marks = Marks()
    store = DurableDedupStore(marks, "workers", max_pending=2)

    for n in range(5):
        await store.mark(f"e{n}")
    await store.flush()

    assert sorted(e for _, _, ids in marks.writes for e in ids) == [f"e{n}" for n in range(5)]
    assert all(len(ids) <= 2 for _, _, ids in marks.writes)


class Down:
    """Dedup marks whose service does not answer."""

    async def check_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> list[str]:
        raise ConnectionError("memory service down")

    async def put_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> int:
        raise ConnectionError("memory service down")


async def test_a_durable_store_whose_service_is_down_handles_as_new_and_keeps_going() -> None:
    store = DurableDedupStore(Down(), "workers")

    store.expect([record("e1", "acme"), record("e2", "acme")])
    with handling("e1", "acme"):
        assert not await store.seen("e1")  # handled, as at-least-once allows
        stored = await store.mark_stored("e1")  # the failed write is retried...
    await asyncio.sleep(0.5)
    retrying = not stored.done()
    await store.give_up()  # ...until the consumer stops

    assert retrying
    assert stored.result() is False  # never stored: its offset is never committed
    assert await store.seen("e1")  # this process still remembers it
    assert not await store.seen("e3")


class Flaky(Marks):
    """Dedup marks whose first write fails."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    async def put_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        ttl_seconds: int | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> int:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("memory service hiccup")
        return await super().put_dedup_marks(
            group, event_ids, ttl_seconds=ttl_seconds, tenant_id=tenant_id, user_id=user_id
        )


async def test_a_mark_whose_write_failed_is_written_again_before_it_counts_as_stored() -> None:
    marks = Flaky()
    store = DurableDedupStore(marks, "workers")

    with handling("e1", "acme"):
        stored = await store.mark_stored("e1")
    written = await asyncio.wait_for(stored, 5)

    assert written is True
    assert marks.failures == 0
    assert ("acme", "workers", "e1") in marks.marks


class Stepped(Marks):
    """Dedup marks whose answers say which envelopes have step records, as the service's do."""

    def __init__(self, stepped: set[str]) -> None:
        super().__init__()
        self.stepped = stepped

    async def check_dedup_marks(
        self,
        group: str,
        event_ids: Sequence[str],
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> list[str]:
        handled = await super().check_dedup_marks(group, event_ids, tenant_id=tenant_id)
        return DedupAnswer(handled, [e for e in event_ids if e in self.stepped])


async def test_the_batch_answer_says_which_envelopes_have_a_journal_of_steps() -> None:
    store = DurableDedupStore(Stepped({"e2"}), "workers")

    store.expect([record("e1", "acme"), record("e2", "acme")])
    with handling("e1", "acme"):
        await store.seen("e1")

    assert (store.journal_hint("e1"), store.journal_hint("e2")) == (False, True)
    assert store.journal_hint("e3") is None  # never asked about
