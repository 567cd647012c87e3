"""Keyset cursors for the registry's lists (opaque to callers, checked on the way in)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from disco_common.pagination import CursorError, decode_cursor, encode_cursor
from disco_registry.errors import InvalidCursor

__all__ = ["CursorPosition", "read_cursor", "write_cursor"]

PositionT = TypeVar("PositionT", bound="CursorPosition")


class CursorPosition(BaseModel):
    """Base of a list's cursor: the sort key of the last item, plus the list's kind.

    ``kind`` makes a cursor of one list unusable on another; unknown fields are
    refused so that an altered cursor is a 400, never a silently different page.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str


def read_cursor(cursor: str | None, model: type[PositionT], kind: str) -> PositionT | None:
    """The position ``cursor`` encodes, or None for the first page.

    Raises:
        InvalidCursor: the cursor was not issued by this list.
    """
    if cursor is None:
        return None
    try:
        position = decode_cursor(cursor, model)
    except CursorError as exc:
        raise InvalidCursor(str(exc)) from None
    if position.kind != kind:
        raise InvalidCursor(
            "invalid cursor: it belongs to another list; use the next_cursor of a page"
        )
    return position


def write_cursor(position: CursorPosition) -> str:
    """The opaque cursor for ``position``."""
    return encode_cursor(position)
