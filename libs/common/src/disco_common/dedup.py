"""Dedup marks: which envelopes a consumer group handled (``/v1/memory/dedup``).

The durable dedup store of a consumer group (``disco.bus.DurableDedupStore``)
asks, once per fetched batch and tenant, which of its envelopes the group handled
already (:class:`DedupCheck`; the answer also names those with step records, see
:mod:`disco_common.steps`), and marks the envelopes it handled, in batches, before
their offsets are committed (:class:`DedupMarksPut`). A mark lives until its TTL.
"""

from __future__ import annotations

from pydantic import Field

from disco_common._base import Body, Record
from disco_common.ids import Id, UtcDatetime
from disco_common.memory import TtlSeconds

__all__ = [
    "DEDUP_BATCH_MAX",
    "DedupCheck",
    "DedupChecked",
    "DedupMark",
    "DedupMarkPut",
    "DedupMarksMade",
    "DedupMarksPut",
]


class DedupMarkPut(Body):
    """Remember that a consumer group handled an envelope
    (``PUT /v1/memory/dedup/{group}/{event_id}``)."""

    ttl_seconds: TtlSeconds | None = Field(
        default=None, description="Forget the mark this long after it was made (kept if absent)."
    )


class DedupMark(Record):
    """A consumer group handled the envelope ``event_id`` (the durable dedup store)."""

    group: Id
    event_id: Id
    expires_at: UtcDatetime | None = None
    created_at: UtcDatetime


DEDUP_BATCH_MAX = 500
"""The most envelope ids one dedup check or batch of marks names."""


class DedupCheck(Body):
    """Which of these envelopes a consumer group handled
    (``POST /v1/memory/dedup/{group}/check``): one question for a fetched batch."""

    event_ids: list[Id] = Field(
        min_length=1, max_length=DEDUP_BATCH_MAX, description="Envelope ids, at most 500."
    )


class DedupChecked(Record):
    """The answer to a :class:`DedupCheck`."""

    handled: list[Id] = Field(
        description="The ids asked about that have a live mark, in the order asked."
    )
    stepped: list[Id] = Field(
        default_factory=list,
        description=(
            "The ids asked about that have live step records (``/v1/memory/steps``): a "
            "handler running again reads their journal; the others have none."
        ),
    )


class DedupMarksPut(Body):
    """Remember that a consumer group handled these envelopes
    (``POST /v1/memory/dedup/{group}/marks``; live marks are kept as they are)."""

    event_ids: list[Id] = Field(
        min_length=1, max_length=DEDUP_BATCH_MAX, description="Envelope ids, at most 500."
    )
    ttl_seconds: TtlSeconds | None = Field(
        default=None, description="Forget the marks this long after they were made."
    )


class DedupMarksMade(Record):
    """The answer to a :class:`DedupMarksPut`."""

    created: int = Field(description="How many marks are new (the rest were live already).")
