"""The sessions of MCP clients on a handshake protocol version, in Postgres for every instance.

``initialize`` opens one (:meth:`McpSessions.open`): the negotiated version, the
client's capabilities and info, and who opened it. Every later request names it
(``Mcp-Session-Id``) and may reach any instance, which reads it
(:meth:`McpSessions.find`); a session is only ever found by the caller who
opened it (the same tenant, user and kind of caller). Each instance keeps the
sessions it read for two seconds: a session ended on another instance may still
be served here that long.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import replace
from datetime import timedelta

from disco_common.ids import utcnow
from disco_gateway.mcp.context import McpSession
from disco_gateway.mcp.repository import McpSessionRepository, purge_sessions
from disco_gateway.scope import CallScope
from disco_service import Database

__all__ = ["McpSessions"]

_KEPT_SECONDS = 2.0
_CAPACITY = 10_000


class McpSessions:
    """Open, find and end sessions (see the module docs).

    Args:
        database: the gateway's database.
        idle_seconds: how long a session lives without a request.
    """

    def __init__(self, database: Database, *, idle_seconds: float) -> None:
        self._database = database
        self._idle_seconds = idle_seconds
        # (tenant, session id) → (read at, session, last noted in use)
        self._kept: OrderedDict[tuple[str, str], tuple[float, McpSession, float]] = OrderedDict()

    async def open(
        self,
        scope: CallScope,
        *,
        protocol_version: str,
        client_info: dict[str, object] | None,
        capabilities: dict[str, object] | None,
    ) -> McpSession:
        """A new session of the caller of ``scope``."""
        session = McpSession(
            session_id=uuid.uuid4().hex,
            tenant_id=scope.tenant_id,
            user_id=scope.user_id,
            subject=scope.identity.sub,
            anonymous=scope.anonymous,
            protocol_version=protocol_version,
            client_info=client_info,
            capabilities=capabilities,
        )
        async with self._database.unit_of_work(scope.tenant_id) as db:
            await McpSessionRepository(db, scope.tenant_id).add(session)
        now = time.monotonic()
        self._keep(session, now, now)
        return session

    async def find(self, scope: CallScope, session_id: str) -> McpSession | None:
        """The caller's session ``session_id`` (None: there is none, or it is another's)."""
        key = (scope.tenant_id, session_id)
        now = time.monotonic()
        kept = self._kept.get(key)
        if kept is not None and now - kept[0] < _KEPT_SECONDS:
            session, noted = kept[1], kept[2]
        else:
            async with self._database.unit_of_work(scope.tenant_id) as db:
                found = await McpSessionRepository(db, scope.tenant_id).get(session_id)
            if found is None:
                self._kept.pop(key, None)
                return None
            session, noted = found, kept[2] if kept is not None else 0.0
            self._keep(session, now, noted)
        if not _owned(session, scope):
            return None
        if now - noted > self._idle_seconds / 10:
            async with self._database.unit_of_work(scope.tenant_id) as db:
                await McpSessionRepository(db, scope.tenant_id).touch(session_id)
            self._keep(session, now, now)
        return session

    async def close(self, scope: CallScope, session_id: str) -> bool:
        """End the caller's session ``session_id``; False when it has none such."""
        if await self.find(scope, session_id) is None:
            return False
        self._kept.pop((scope.tenant_id, session_id), None)
        async with self._database.unit_of_work(scope.tenant_id) as db:
            return await McpSessionRepository(db, scope.tenant_id).delete(session_id)

    async def purge(self) -> int:
        """Delete every tenant's idle sessions (a system job)."""
        cutoff = utcnow() - timedelta(seconds=self._idle_seconds)
        async with self._database.unit_of_work(None) as db:
            return await purge_sessions(db, cutoff)

    def _keep(self, session: McpSession, read_at: float, noted: float) -> None:
        key = (session.tenant_id, session.session_id)
        self._kept[key] = (read_at, replace(session), noted)
        self._kept.move_to_end(key)
        while len(self._kept) > _CAPACITY:
            self._kept.popitem(last=False)


def _owned(session: McpSession, scope: CallScope) -> bool:
    return session.user_id == scope.user_id and session.anonymous == scope.anonymous
