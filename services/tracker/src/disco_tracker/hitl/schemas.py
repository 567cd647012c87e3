"""The HITL domain's own models (the public ones live in ``disco_common.tracker``)."""

from __future__ import annotations

from pydantic import BaseModel

from disco_common.ids import UtcDatetime

__all__ = ["WaitCursor"]


class WaitCursor(BaseModel):
    """Where a page of waits ended (inside the opaque cursor)."""

    created_at: UtcDatetime
    correlation_id: str
    response_event: str
