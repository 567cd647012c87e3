"""SavedCopies: the contexts a Planner or Worker last saved, found by what they wait for."""

from __future__ import annotations

import asyncio

from disco.agents._durable import KeyedLocks, SavedCopies, json_size
from disco_common.plans import PlanContextData, PlanStatus


def _plan(plan_id: str, *waiting: str, status: PlanStatus = PlanStatus.RUNNING) -> PlanContextData:
    return PlanContextData(
        plan_id=plan_id,
        goal_event="goal.requested",
        response_event="goal.done",
        correlation_ids=list(waiting),
        status=status,
    )


def _waiting(data: PlanContextData) -> list[str]:
    return [] if data.status.is_final else data.correlation_ids


def test_a_copy_is_found_by_each_id_it_waits_for_and_handed_out_once() -> None:
    copies = SavedCopies(_waiting)
    copies.keep("p1", 3, _plan("p1", "a", "b"))

    taken = copies.take("b")

    assert taken is not None
    assert (taken[0], taken[1], taken[2].plan_id) == ("p1", 3, "p1")
    assert copies.take("a") is None  # handed out: the step that took it saves the next
    assert len(copies) == 0


def test_a_newer_copy_replaces_the_last_and_what_it_waited_for() -> None:
    copies = SavedCopies(_waiting)
    copies.keep("p1", 1, _plan("p1", "a"))
    copies.keep("p1", 2, _plan("p1", "b"))

    assert copies.take("a") is None
    taken = copies.take("b")
    assert taken is not None
    assert taken[1] == 2


def test_a_forgotten_or_final_copy_is_not_found() -> None:
    copies = SavedCopies(_waiting)
    copies.keep("p1", 1, _plan("p1", "a"))
    copies.keep("p2", 1, _plan("p2", "b", status=PlanStatus.COMPLETED))

    copies.forget("p1")

    assert copies.take("a") is None
    assert copies.take("b") is None


def test_only_the_most_recently_saved_copies_are_kept() -> None:
    copies = SavedCopies(_waiting, limit=2)
    for index in range(3):
        copies.keep(f"p{index}", 1, _plan(f"p{index}", f"answer-{index}"))

    assert len(copies) == 2
    assert copies.take("answer-0") is None
    assert copies.take("answer-2") is not None


def test_copies_are_kept_within_their_byte_budget_and_a_large_one_not_at_all() -> None:
    small = _plan("p0", "answer-0")
    size = json_size(small)
    copies = SavedCopies(_waiting, max_bytes=16 * (size + 64))
    big = _plan("big", "answer-big")
    big.state["blob"] = "x" * (size + 64)  # over a sixteenth of the budget

    copies.keep("big", 1, big)
    for index in range(20):
        copies.keep(f"p{index}", 1, _plan(f"p{index}", f"answer-{index}"))

    assert copies.take("answer-big") is None
    assert len(copies) < 20  # the oldest went to stay within the budget
    assert copies.take("answer-19") is not None
    assert copies.take("answer-0") is None


def test_a_taken_copy_still_names_its_owner_until_the_next_is_kept() -> None:
    copies = SavedCopies(_waiting)
    copies.keep("p1", 1, _plan("p1", "a", "b"))

    assert copies.take("a") is not None
    assert copies.owner("b") == "p1"  # the next answer waits its turn for p1's save

    copies.keep("p1", 2, _plan("p1", "b"))
    assert copies.owner("a") is None
    copies.forget("p1")
    assert copies.owner("b") is None


async def test_keyed_locks_let_one_holder_of_a_key_in_at_a_time_and_are_dropped() -> None:
    locks = KeyedLocks()
    inside: list[str] = []
    order: list[str] = []

    async def hold(key: str | None, name: str) -> None:
        async with locks.hold(key):
            inside.append(name)
            assert len([n for n in inside if n.startswith("t1")]) <= 1
            await asyncio.sleep(0.01)
            order.append(name)
            inside.remove(name)

    await asyncio.gather(
        hold("t1", "t1-a"), hold("t1", "t1-b"), hold("t2", "t2"), hold(None, "free")
    )

    assert order.index("t1-a") < order.index("t1-b")
    assert len(locks) == 0
