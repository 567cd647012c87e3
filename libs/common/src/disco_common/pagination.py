"""Cursor pagination: one page shape and one cursor convention for every list.

A list endpoint answers with :class:`Page` (``items`` and ``next_cursor``). The
cursor is opaque to callers: pass ``next_cursor`` back as ``cursor`` to get the
next page, and stop when it is ``None``. Services build it with
:func:`encode_cursor` from a small JSON object (typically the sort key of the
last item, e.g. ``{"after": "<created_at>", "id": "<id>"}``) and read it back
with :func:`decode_cursor`, which raises :class:`CursorError` (a ``ValueError``)
on anything it did not produce. Every service answers a cursor its list did not
issue with 400 and the code ``invalid_cursor`` (``disco_service.Paginator``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, Field, JsonValue, ValidationError

from disco_common._base import Body

__all__ = [
    "CURSOR_MAX_CHARS",
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "CursorError",
    "Page",
    "PageQuery",
    "decode_cursor",
    "encode_cursor",
]

DEFAULT_PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 200
CURSOR_MAX_CHARS = 1024
_CURSOR_ALPHABET = re.compile(r"^[A-Za-z0-9_-]+$")

ItemT = TypeVar("ItemT")
ModelT = TypeVar("ModelT", bound=BaseModel)


class CursorError(ValueError):
    """A pagination cursor that this service did not issue (or that was altered)."""


class Page(BaseModel, Generic[ItemT]):
    """One page of a list: the items, and the cursor of the next page if there is one."""

    items: list[ItemT] = Field(description="The items of this page, in the list's order.")
    next_cursor: str | None = Field(
        default=None,
        description="Pass as `cursor` to fetch the next page; absent on the last page.",
    )


class PageQuery(Body):
    """The paging part of every list query (list filters extend it)."""

    # The length is checked where the cursor is decoded, not here, so that a
    # too-long cursor is refused like any other bad one (400 invalid_cursor).
    cursor: str | None = Field(
        default=None,
        description=(
            "The `next_cursor` of the previous page; omit for the first page. A cursor the "
            "list did not issue for the same filters is refused with 400 `invalid_cursor`."
        ),
        json_schema_extra={"maxLength": CURSOR_MAX_CHARS},
    )
    limit: int = Field(
        default=DEFAULT_PAGE_LIMIT,
        ge=1,
        le=MAX_PAGE_LIMIT,
        description=f"Items per page (1-{MAX_PAGE_LIMIT}).",
    )


def encode_cursor(position: Mapping[str, Any] | BaseModel) -> str:
    """Encode a position in a list as an opaque cursor.

    Args:
        position: a small JSON-able mapping, or a model (dumped in JSON mode).

    Returns:
        base64url (no padding) of the compact JSON of ``position``.

    Raises:
        CursorError: the encoded cursor would exceed ``CURSOR_MAX_CHARS``.
    """
    data = position.model_dump(mode="json") if isinstance(position, BaseModel) else position
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    cursor = base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode("ascii")
    if len(cursor) > CURSOR_MAX_CHARS:
        raise CursorError(
            f"cursor would be {len(cursor)} characters (limit {CURSOR_MAX_CHARS}): "
            "keep cursor positions to the sort key of the last item"
        )
    return cursor


@overload
def decode_cursor(cursor: str) -> dict[str, JsonValue]: ...
@overload
def decode_cursor(cursor: str, model: type[ModelT]) -> ModelT: ...
def decode_cursor(cursor: str, model: type[ModelT] | None = None) -> dict[str, JsonValue] | ModelT:
    """Decode a cursor made by :func:`encode_cursor`.

    Args:
        cursor: the cursor a caller sent back.
        model: validate the position into this model (recommended: it rejects a
            well-formed cursor of another list).

    Raises:
        CursorError: the cursor is not base64url, not a JSON object, too long,
            or (with ``model``) does not fit the model.
    """
    if not cursor or len(cursor) > CURSOR_MAX_CHARS:
        raise CursorError("invalid cursor: empty or too long; use the next_cursor of a page")
    if not _CURSOR_ALPHABET.fullmatch(cursor):
        raise CursorError("invalid cursor: not base64url; use the next_cursor of a page")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise CursorError(
            "invalid cursor: not one this service issued; use the next_cursor of a page"
        ) from exc
    if not isinstance(data, dict):
        raise CursorError(
            "invalid cursor: not one this service issued; use the next_cursor of a page"
        )
    if model is None:
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CursorError(
            "invalid cursor: it belongs to another list or query; use the next_cursor of a page"
        ) from exc
