"""Step records: the journal of a handler's steps (``/v1/memory/steps``).

A handler wraps an effect in ``disco.step(name, fn)``: the step's result is
recorded in the memory service, keyed by the tenant, the consumer group, the
envelope's id and the step's name, before the handler goes on. A redelivered
envelope gets the recorded result back instead of running the step again. The
first record of a step wins: recording it again answers the stored result.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, JsonValue, StringConstraints

from disco_common._base import Body, Record
from disco_common.ids import Id, UtcDatetime
from disco_common.memory import TTL_MAX_SECONDS

__all__ = [
    "STEP_RESULT_MAX_BYTES",
    "StepJournal",
    "StepName",
    "StepRecord",
    "StepRecordPut",
]

STEP_RESULT_MAX_BYTES = 1024 * 1024
"""The largest step result the memory service keeps (its JSON encoding, 1 MiB)."""

StepName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$"),
]
"""A step's name within its handler: 1-200 printable characters."""


class StepRecordPut(Body):
    """Record a step's result (``POST /v1/memory/steps/{group}/{envelope_id}``)."""

    name: StepName
    result: JsonValue = Field(description="The step's result: any JSON value, at most 1 MiB.")
    ttl_seconds: Annotated[int, Field(ge=1, le=TTL_MAX_SECONDS)] | None = Field(
        default=None, description="Forget the record this long after it was made."
    )


class StepRecord(Record):
    """The recorded result of one step of a consumer group's handling of an envelope."""

    group: Id
    envelope_id: Id
    name: StepName
    result: JsonValue
    expires_at: UtcDatetime | None = None
    created_at: UtcDatetime


class StepJournal(Record):
    """Every live step record of one envelope in one consumer group, oldest first
    (``GET /v1/memory/steps/{group}/{envelope_id}``)."""

    group: Id
    envelope_id: Id
    steps: list[StepRecord]
