"""What the typed clients share for lists: query models from keyword filters, page walking."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from disco_common.pagination import Page, PageQuery

__all__ = ["pages", "query_of", "query_params", "segment"]

QueryT = TypeVar("QueryT", bound=PageQuery)
ItemT = TypeVar("ItemT")


def segment(value: str) -> str:
    """``value`` as one URL path segment."""
    # Ids and names are URL-safe by contract; quoting keeps a bad one from
    # changing the path. Event types may hold "/" (the route takes the rest of the path).
    return quote(value, safe="")


def query_params(query: PageQuery) -> dict[str, Any]:
    """A list query as URL parameters (unset filters left out)."""
    params: dict[str, Any] = query.model_dump(mode="json", exclude_none=True)
    return params


def query_of(kind: type[QueryT], **filters: object) -> QueryT:
    """The query model ``kind`` from keyword filters (``None`` ones left out).

    Raises:
        ValueError: a filter is not valid (pydantic's ValidationError), before anything is sent.
    """
    # Filters left out keep the query model's defaults (e.g. its page size).
    return kind.model_validate({key: value for key, value in filters.items() if value is not None})


async def pages(
    query: QueryT, fetch: Callable[[QueryT], Awaitable[Page[ItemT]]]
) -> AsyncIterator[ItemT]:
    """Every item of every page ``fetch`` returns for ``query``, following the cursors."""
    while True:
        page = await fetch(query)
        for item in page.items:
            yield item
        if page.next_cursor is None:
            return
        query = query.model_copy(update={"cursor": page.next_cursor})
