"""Keyset pagination: one way for every list endpoint of every service.

A list route takes a :class:`~disco_common.pagination.PageQuery` (``cursor``,
``limit`` and the list's filters) and answers a
:class:`~disco_common.pagination.Page` (``items``, ``next_cursor``). Three
pieces make that the same everywhere:

- :class:`Keyset`, in a repository: the list's order in SQL (sort columns that
  are unique together) and the seek condition for "after this key";
- :class:`Paginator`, in a service: one per list, naming it and the type of
  its sort key. :meth:`Paginator.open` reads the caller's cursor; the
  :class:`PageRequest` it returns says where to start and how many rows to
  fetch, and :meth:`PageRequest.page` cuts the rows to the page and writes the
  next cursor from the sort key of its last item;
- :class:`InvalidCursor`: 400 ``invalid_cursor``, for every cursor a list did
  not issue itself for the same filters (garbled, altered, another list's, or
  one issued before the filters changed).

The cursor is opaque to callers: :func:`disco_common.pagination.encode_cursor`
of ``{"of": <list name>, "after": <sort key of the last item>, "scope": <hash
of the filters>}``. Seeking by key (never by offset) keeps a page stable while rows
are added or removed before it, and costs one index range scan however deep
the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter, ValidationError

from disco_common.canonical import json_hash
from disco_common.errors import ErrorCode
from disco_common.pagination import CursorError, Page, PageQuery, decode_cursor, encode_cursor
from disco_service._errors import BadRequest

__all__ = ["InvalidCursor", "Keyset", "PageRequest", "Paginator"]

KeyT = TypeVar("KeyT", bound=tuple[Any, ...])
ItemT = TypeVar("ItemT")
RowT = TypeVar("RowT")

_USE_NEXT_CURSOR = "use the next_cursor of a page, or omit cursor for the first page"


class InvalidCursor(BadRequest):
    """400 ``invalid_cursor``: a cursor this list did not issue for these filters."""

    code = ErrorCode.INVALID_CURSOR.value


class _Cursor(BaseModel):
    """What a cursor carries (inside its base64url JSON)."""

    model_config = ConfigDict(extra="forbid")

    of: str
    after: list[JsonValue]
    scope: str


class Keyset:
    """The order of a list in SQL, for keyset (seek) pagination.

    ``Keyset("created_at", "plan_id", descending=True)``: the columns must be
    unique together (end with the primary key) and are all sorted the same way.

    Attributes:
        columns: the sort columns, as written in the query (``"a.name"``).
        descending: whether the list runs from the highest key down.
        order_by: the ``ORDER BY`` clause of this order.
    """

    def __init__(self, *columns: str, descending: bool = False) -> None:
        if not columns:
            raise ValueError("a keyset needs at least one column")
        self.columns = columns
        self.descending = descending
        direction = " DESC" if descending else ""
        self.order_by = "ORDER BY " + ", ".join(f"{column}{direction}" for column in columns)
        placeholders = ", ".join(f":keyset_{index}" for index in range(len(columns)))
        comparison = "<" if descending else ">"
        self._seek = f"({', '.join(columns)}) {comparison} ({placeholders})"

    def after(self, key: Sequence[Any] | None) -> tuple[str, dict[str, Any]]:
        """The condition for the rows after ``key`` in this order, and its parameters.

        Args:
            key: the sort key of the last row already seen (one value per
                column), or None for the first page.

        Returns:
            ``("(a, b) > (:keyset_0, :keyset_1)", {...})``, or ``("TRUE", {})``
            without a key: splice the condition into the ``WHERE`` clause and
            add the parameters to the query's.
        """
        if key is None:
            return "TRUE", {}
        if len(key) != len(self.columns):
            raise ValueError(f"a key of {len(key)} values for {len(self.columns)} sort columns")
        return self._seek, {f"keyset_{index}": value for index, value in enumerate(key)}


class Paginator(Generic[KeyT]):
    """The paging of one list: reads its cursors and writes the next one.

    ``Paginator("plans", tuple[UtcDatetime, str])``: the name keeps a cursor of
    one list from being used on another; ``key`` is the type of the sort key
    (the values of the repository's :class:`Keyset` columns), which a cursor
    must decode into.
    """

    def __init__(self, name: str, key: type[KeyT]) -> None:
        self.name = name
        self._key: TypeAdapter[KeyT] = TypeAdapter(key)

    def open(self, query: PageQuery, *, scope: JsonValue = None) -> PageRequest[KeyT]:
        """Where the page ``query`` asks for starts.

        Args:
            query: the list query (its filters bind the cursor: paging on with
                other filters is refused).
            scope: what else selects the list, such as a path parameter
                (``plan_id``); it binds the cursor as the filters do.

        Raises:
            InvalidCursor: ``query.cursor`` was not issued by this list for
                these filters and this scope.
        """
        fingerprint = json_hash(
            [query.model_dump(mode="json", exclude={"cursor", "limit"}), scope]
        )[:16]
        after = None if query.cursor is None else self._read(query.cursor, fingerprint)
        return PageRequest(self, after=after, limit=query.limit, fingerprint=fingerprint)

    def _read(self, cursor: str, fingerprint: str) -> KeyT:
        try:
            body = decode_cursor(cursor, _Cursor)
        except CursorError as exc:
            raise InvalidCursor(f"{exc}") from None
        if body.of != self.name:
            raise InvalidCursor(f"invalid cursor: it belongs to another list; {_USE_NEXT_CURSOR}")
        if body.scope != fingerprint:
            raise InvalidCursor(
                "invalid cursor: it was issued for other filters; keep the filters while "
                "paging, or start again without a cursor"
            )
        try:
            return self._key.validate_python(body.after)
        except ValidationError:
            raise InvalidCursor(
                f"invalid cursor: not one this service issued; {_USE_NEXT_CURSOR}"
            ) from None

    def _write(self, key: KeyT, fingerprint: str) -> str:
        after = self._key.dump_python(key, mode="json")
        return encode_cursor({"of": self.name, "after": after, "scope": fingerprint})


@dataclass(frozen=True)
class PageRequest(Generic[KeyT]):
    """One page to read, as :meth:`Paginator.open` understood it.

    Attributes:
        after: the sort key of the previous page's last item (None on the
            first page); hand it to the repository's :meth:`Keyset.after`.
        limit: the items per page.
    """

    paginator: Paginator[KeyT]
    after: KeyT | None
    limit: int
    fingerprint: str

    @property
    def fetch(self) -> int:
        """How many rows to read: one more than the page, to learn whether another follows."""
        return self.limit + 1

    @overload
    def page(self, rows: Sequence[ItemT], key: Callable[[ItemT], KeyT]) -> Page[ItemT]: ...
    @overload
    def page(
        self, rows: Sequence[RowT], key: Callable[[RowT], KeyT], item: Callable[[RowT], ItemT]
    ) -> Page[ItemT]: ...
    def page(
        self,
        rows: Sequence[Any],
        key: Callable[[Any], KeyT],
        item: Callable[[Any], Any] | None = None,
    ) -> Page[Any]:
        """The page of ``rows`` (read with :attr:`fetch`), with the cursor of the next one.

        Args:
            rows: the rows after :attr:`after`, in the list's order, at most :attr:`fetch`.
            key: the sort key of a row (what the repository's keyset columns hold).
            item: what a row becomes on the page (default: the row itself).
        """
        kept = rows[: self.limit]
        next_cursor = None
        if len(rows) > self.limit and kept:
            next_cursor = self.paginator._write(key(kept[-1]), self.fingerprint)
        items = [item(row) for row in kept] if item is not None else list(kept)
        return Page[Any](items=items, next_cursor=next_cursor)
