"""What an agent's consumer is built with: its dedup store and its step journal.

A durable dedup store (:class:`~disco.bus.DurableDedupStore`) when the agent's
``durable_dedup`` is on and its memory keeps dedup marks, and the journal of its
handlers' steps (``disco.step``) in that memory. :meth:`~disco.agents.Agent.start`
builds both.
"""

from __future__ import annotations

from disco._steps import StepJournalStore, StepLog
from disco.agents._errors import AgentError
from disco.agents._ports import AgentMemory
from disco.bus import DedupMarks, DedupStore, DurableDedupStore
from disco.settings import BusSettings

__all__ = ["durable_dedup_store", "step_log"]


def durable_dedup_store(
    name: str,
    memory: AgentMemory | None,
    settings: BusSettings,
    *,
    wanted: bool | None,
    default: bool,
) -> DedupStore | None:
    """Agent ``name``'s durable dedup store when it is on (None: the consumer's in-process
    one): ``wanted`` is the agent's ``durable_dedup`` (None: its kind's ``default``).

    Raises:
        AgentError: ``durable_dedup=True`` with a memory that keeps no marks.
    """
    if wanted is False or (wanted is None and not default):
        return None
    marks: object = memory  # AgentMemory says nothing about marks; a MemoryClient keeps them
    if not isinstance(marks, DedupMarks):
        if wanted:
            raise AgentError(
                f"agent {name!r}: durable_dedup=True needs a memory that keeps dedup "
                f"marks (a MemoryClient), not {type(memory).__name__}"
            )
        return None  # a stand-in memory (disco.testing): in-process dedup
    return DurableDedupStore(
        marks,
        name,
        ttl_seconds=settings.bus_dedup_ttl_seconds,
        window=settings.bus_dedup_window_size,
    )


def step_log(
    group: str, memory: AgentMemory | None, settings: BusSettings, dedup: DedupStore | None
) -> StepLog | None:
    """The journal of ``group``'s steps (``disco.step``) in ``memory``, or None when the
    memory keeps none. Records live as long as dedup marks (``bus_dedup_ttl_seconds``);
    the durable dedup store's batch answers say which envelopes have a journal to read."""
    store: object = memory
    if not isinstance(store, StepJournalStore):
        return None
    return StepLog(
        store,
        group,
        ttl_seconds=settings.bus_dedup_ttl_seconds or None,
        window=max(1, min(settings.bus_dedup_window_size, 10_000)),
        hint=dedup.journal_hint if isinstance(dedup, DurableDedupStore) else None,
    )
