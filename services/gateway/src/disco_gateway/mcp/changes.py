"""``notifications/tools/list_changed``: who asked to hear of it, and when their tools changed.

Each instance reads ``system-events`` group-less, for the agents' lifecycle
(``agent.registered``, ``agent.deregistered``, ``agent.expired``), and only
looks at the event type header. A burst of them (a fleet starting) is taken
as one change, half a second after the last: the agent directory and every
tool listing are read afresh, and the clients listening (a handshake session's
``GET /mcp`` stream, a 2026-07-28 ``subscriptions/listen`` stream) are told
when the tools *they* see differ from what they saw before: another tenant's
agents coming and going tell them nothing.

:class:`ViewBus` is the SDK's ``SubscriptionBus`` seam for its
``subscriptions/listen`` handler, scoped to the listening caller's view.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog
from mcp.server.subscriptions import ServerEvent, ToolsListChanged

from disco.bus import TopicReader
from disco.settings import BusSettings
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.mcp.catalog import ToolCatalog
from disco_gateway.mcp.context import View, current_caller
from disco_gateway.mcp.metrics import McpMetrics

__all__ = ["ToolChanges", "ViewBus"]

_log = structlog.get_logger("disco_gateway.mcp")

_AGENT_EVENTS = frozenset(
    kind.value.encode()
    for kind in (
        SystemEventType.AGENT_REGISTERED,
        SystemEventType.AGENT_DEREGISTERED,
        SystemEventType.AGENT_EXPIRED,
    )
)
SETTLE_SECONDS = 0.5
"""How long after the last agent event the tools are read afresh."""

Listener = Callable[[], None]


class ToolChanges:
    """Follows the agents' lifecycle and tells each listener when its tools changed.

    Args:
        settings: how to reach the bus.
        catalog: the tool listings (read afresh on a change).
        directory: the agent directory (forgotten on a change).
        metrics: counts the listeners.
    """

    def __init__(
        self,
        settings: BusSettings,
        catalog: ToolCatalog,
        directory: AgentDirectory,
        metrics: McpMetrics,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._catalog = catalog
        self._directory = directory
        self._listeners: dict[View, dict[object, Listener]] = {}
        self._seen: dict[View, str] = {}
        self._changed = asyncio.Event()
        self._reader: TopicReader | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._notes: set[asyncio.Task[None]] = set()

    def listen(self, view: View, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` each time the tools of ``view`` change; returns how to stop.

        ``listener`` runs on the event loop and must not block.
        """
        token = object()
        self._listeners.setdefault(view, {})[token] = listener
        self._metrics.listeners.inc()
        if view not in self._seen:
            # What the listener sees now, to tell a change from a listing read again.
            note = asyncio.create_task(self._note(view))
            self._notes.add(note)
            note.add_done_callback(self._notes.discard)

        def stop() -> None:
            listeners = self._listeners.get(view)
            if listeners is not None and listeners.pop(token, None) is not None:
                self._metrics.listeners.dec()
                if not listeners:
                    del self._listeners[view]

        return stop

    def recheck(self) -> None:
        """Read the tools afresh soon (as after an agent event) and tell each listener
        whose tools differ."""
        self._changed.set()

    def listening(self, view: View) -> int:
        """How many listeners ``view`` has."""
        return len(self._listeners.get(view, {}))

    async def start(self) -> None:
        """Position the reader at the end of ``system-events`` and start following."""
        reader = TopicReader(self._settings, [Topic.SYSTEM_EVENTS])
        await reader.start()
        self._reader = reader
        self._tasks += [
            asyncio.create_task(self._read(reader), name="disco-gateway-mcp-agents"),
            asyncio.create_task(self._settle(), name="disco-gateway-mcp-changes"),
        ]

    async def stop(self) -> None:
        """Stop following (idempotent)."""
        tasks, self._tasks = [*self._tasks, *self._notes], []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    async def _note(self, view: View) -> None:
        with contextlib.suppress(Exception):  # unknown: the next change is told anyway
            self._seen.setdefault(view, (await self._catalog.listing(view)).fingerprint)

    async def _read(self, reader: TopicReader) -> None:
        while True:
            try:
                records = await reader.read(timeout=0.5)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker hiccup: the reader reconnects by itself
                _log.warning("agent events not read; reading on", error=repr(exc))
                await asyncio.sleep(0.5)
                continue
            for record in records:
                kind = next((value for name, value in record.headers if name == "ce_type"), None)
                if kind in _AGENT_EVENTS:
                    self.recheck()

    async def _settle(self) -> None:
        while True:
            await self._changed.wait()
            while self._changed.is_set():  # half a second of quiet first
                self._changed.clear()
                await asyncio.sleep(SETTLE_SECONDS)
            try:
                await self._apply()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _log.warning("tool changes not applied", error=repr(exc))

    async def _apply(self) -> None:
        self._directory.forget()
        self._catalog.invalidate()
        for view in list(self._listeners):
            fingerprint = (await self._catalog.refresh(view)).fingerprint
            if self._seen.get(view) == fingerprint:
                continue
            self._seen[view] = fingerprint
            for listener in list(self._listeners.get(view, {}).values()):
                try:
                    listener()
                except Exception as exc:  # one listener must not keep the others from it
                    _log.warning("a tool change listener failed", error=repr(exc))
        for view in list(self._seen):
            if view not in self._listeners:
                del self._seen[view]


class ViewBus:
    """The SDK's ``SubscriptionBus`` for ``subscriptions/listen``: a stream hears of changes to
    the tools of the caller who opened it (read from the request's context)."""

    def __init__(self, changes: ToolChanges) -> None:
        self._changes = changes

    async def publish(self, event: ServerEvent) -> None:
        """A tool change announced through the SDK is checked like an agent event: every
        view whose tools differ is told (disco's door has no prompts or resources, so
        other events have no listener)."""
        if isinstance(event, ToolsListChanged):
            self._changes.recheck()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Register ``listener`` for the calling view's tool changes."""
        view = current_caller().view
        return self._changes.listen(view, lambda: listener(ToolsListChanged()))
