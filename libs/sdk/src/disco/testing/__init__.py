"""Unit-test agents without a broker or services.

:class:`AgentTestKit` runs one or more agents in-process: what a handler
publishes is recorded and, by default, delivered to every agent in the kit
that handles it (each agent as its own consumer group, envelope ids
deduplicated), until nothing is left to deliver. Task and plan contexts live in
an :class:`InMemoryMemory` with the memory service's optimistic-concurrency
rules. So a Worker delegating to a Tool, a Planner driving both, or a HITL
question answered by the test all run in a plain ``pytest`` test::

    async def test_the_calculator_adds() -> None:
        async with AgentTestKit(calculator) as kit:
            request = await kit.request("calculate.requested", {"expression": "1+2"},
                                        response_event="calculated")
            assert kit.result_of(request).result == {"value": 3}

Requests for work no agent in the kit does stay unanswered until the test
answers them (:meth:`AgentTestKit.reply`); questions to humans until
:meth:`AgentTestKit.answer_human`. Journaled steps (``disco.step``) are recorded
in the kit's memory (:attr:`InMemoryMemory.steps`), so a redelivered envelope
gets its steps' results back without running them again. :meth:`AgentTestKit.crash_after` kills a
handler between a save and the publishing it promised, or between a step's
effect and its record (a :class:`CrashPoint`), and redelivers its envelope, to
prove that the work still finishes. Our own
integration tests still use the real broker and services; this kit is for agent
authors' unit tests.
"""

from disco._faults import CRASH_ENV, CRASH_EXIT_CODE, CrashPoint
from disco.testing._kit import AgentTestKit, Crash, HandlerFailedError, Published, SimulatedCrash
from disco.testing._memory import InMemoryMemory

__all__ = [
    "CRASH_ENV",
    "CRASH_EXIT_CODE",
    "AgentTestKit",
    "Crash",
    "CrashPoint",
    "HandlerFailedError",
    "InMemoryMemory",
    "Published",
    "SimulatedCrash",
]
