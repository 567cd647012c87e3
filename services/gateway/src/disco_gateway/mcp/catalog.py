"""The tools each view sees, built from the agent directory and kept per instance.

A view's listing (every tool it may call, sorted by name) is built once from
the directory's agents and reused: for ``DISCO_GATEWAY_REGISTRY_CACHE_SECONDS``
as it is, then served while a fresh one is built in the background, so that a
``tools/list`` never waits for the registry once the view was listed. When
agents register, leave or expire (:mod:`disco_gateway.mcp.changes`), every
listing is marked stale: the next read of it waits for a fresh one.

Pages are cut by name (the kit's keyset cursors): a page does not shift when
tools are added or removed before it, and a cursor is bound to its view.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import mcp_types as types

from disco_common.a2a_cards import A2ACardSource
from disco_common.canonical import json_hash
from disco_common.pagination import PageQuery
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.mcp.context import View
from disco_gateway.mcp.tools import ToolEntry, agent_of, entries_of
from disco_gateway.settings import GatewaySettings
from disco_service import Paginator

__all__ = ["Listing", "ToolCatalog"]

_PAGES = Paginator("mcp_tools", tuple[str])


@dataclass(frozen=True)
class Listing:
    """The tools of one view at one time, sorted by name."""

    entries: tuple[ToolEntry, ...]
    loaded_at: float
    names: list[str] = field(init=False)
    by_name: dict[str, ToolEntry] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", [entry.name for entry in self.entries])
        object.__setattr__(self, "by_name", {entry.name: entry for entry in self.entries})

    @cached_property
    def fingerprint(self) -> str:
        """A hash of every tool as listed: two listings with the same one look the same."""
        return json_hash(
            [entry.tool.model_dump(mode="json", by_alias=True) for entry in self.entries]
        )


class ToolCatalog:
    """Listings per view (see the module docs).

    Args:
        directory: the agents, from the registry.
        settings: the public agents and tenant, the cache time, the page size.
    """

    def __init__(self, directory: AgentDirectory, settings: GatewaySettings) -> None:
        self._directory = directory
        self._settings = settings
        self._listings: dict[View, Listing] = {}
        self._stale: set[View] = set()
        self._loading: dict[View, asyncio.Task[Listing]] = {}
        self._generation = 0

    async def listing(self, view: View) -> Listing:
        """The view's tools: cached, refreshed in the background once old, read afresh when
        marked stale."""
        current = self._listings.get(view)
        if current is None or view in self._stale:
            return await self._load(view)
        if time.monotonic() - current.loaded_at >= self._settings.registry_cache_seconds:
            self._start_load(view)  # served meanwhile: a tools/list never waits for it
        return current

    def known(self, view: View) -> Listing | None:
        """The view's listing as last built (None: never listed here)."""
        return self._listings.get(view)

    def invalidate(self) -> None:
        """Agents changed: the next read of any listing waits for a fresh one."""
        self._stale.update(self._listings)
        # A load under way may have read what changed: it serves who waits for it, and
        # is not kept; the next read starts another.
        self._loading.clear()
        self._generation += 1

    async def refresh(self, view: View) -> Listing:
        """A fresh listing of ``view`` (read now)."""
        self._stale.add(view)
        return await self._load(view)

    async def page(self, view: View, cursor: str | None) -> types.ListToolsResult:
        """One page of ``tools/list``.

        Raises:
            InvalidCursor: ``cursor`` is not one this list gave this view.
        """
        listing = await self.listing(view)
        query = PageQuery(cursor=cursor, limit=self._settings.mcp_page_size)
        request = _PAGES.open(query, scope=[view.tenant_id, view.anonymous])
        start = 0 if request.after is None else bisect_right(listing.names, request.after[0])
        rows = listing.entries[start : start + request.fetch]
        page = request.page(rows, key=lambda entry: (entry.name,))
        return types.ListToolsResult(
            tools=[entry.tool for entry in page.items], next_cursor=page.next_cursor
        )

    async def find(self, view: View, name: str) -> ToolEntry | None:
        """The tool ``name`` as ``view`` sees it now (None: the view has no such tool)."""
        listing = await self.listing(view)
        entry = listing.by_name.get(name)
        if entry is not None:
            return entry
        # Registered since the listing was built? Ask about that one agent.
        agent = agent_of(name)
        if agent is None or not self._visible(view, agent):
            return None
        source = await self._directory.agent(view.tenant_id, agent)
        if source is None:
            return None
        return next((e for e in entries_of(source) if e.name == name), None)

    def _visible(self, view: View, agent: str) -> bool:
        return not view.anonymous or self._settings.is_public_agent(agent)

    def _start_load(self, view: View) -> asyncio.Task[Listing]:
        loading = self._loading.get(view)
        if loading is None:
            loading = asyncio.ensure_future(self._build(view))
            self._loading[view] = loading
            generation = self._generation
            loading.add_done_callback(lambda done: self._loaded(view, done, generation))
        return loading

    def _loaded(self, view: View, done: asyncio.Task[Listing], generation: int) -> None:
        if self._loading.get(view) is done:
            del self._loading[view]
        if generation != self._generation or done.cancelled() or done.exception() is not None:
            return
        self._listings[view] = done.result()
        self._stale.discard(view)

    async def _load(self, view: View) -> Listing:
        # A waiter that is cancelled does not cancel the load the others share.
        return await asyncio.shield(self._start_load(view))

    async def _build(self, view: View) -> Listing:
        started = time.monotonic()
        sources = await self._directory.agents(view.tenant_id)
        visible = (source for source in sources if self._visible(view, source.name))
        return Listing(tuple(sorted(_entries(visible), key=lambda e: e.name)), started)


def _entries(sources: Iterable[A2ACardSource]) -> list[ToolEntry]:
    entries: list[ToolEntry] = []
    for source in sources:
        entries.extend(entries_of(source))
    return entries
