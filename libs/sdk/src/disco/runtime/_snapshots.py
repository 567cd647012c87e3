"""Snapshots: the state saved after every step, read back to resume a session.

:class:`MemorySnapshotStore` writes full and slim states side by side to the
memory service (``PUT /v1/memory/snapshots/{session_id}/{agent_id}``) through
the SDK's :class:`~disco.clients.MemoryClient`, and reads the latest back (the
full state; the slim one when the full one cannot be read).

A write never holds a step up for more than the one HTTP call of its own
attempt: when it fails, the step goes on and a background task retries (with
backoff, logging every failure) the *latest* state of that session — a newer
save replaces an older one still waiting, so an older state never overwrites a
newer one. ``durable=True`` saves (before waiting for an approval, at the end of
an execution) retry in place and raise when the state could not be written.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from disco.runtime._serializers import (
    FULL_FORMAT,
    FullSerializer,
    SlimSerializer,
    StateSerializationError,
)
from disco.runtime._state import AgentState

if TYPE_CHECKING:
    from disco.clients import MemoryClient

__all__ = [
    "InMemorySnapshotStore",
    "MemorySnapshotStore",
    "SnapshotError",
    "SnapshotStore",
]

_log = structlog.get_logger("disco.runtime")


class SnapshotError(RuntimeError):
    """A durable snapshot could not be written."""


class SnapshotStore(Protocol):
    """Where agent states are saved and read back."""

    async def save(self, state: AgentState, *, durable: bool = False) -> None:
        """Save ``state`` as the latest of its session and agent.

        Raises:
            SnapshotError: (``durable`` only) it could not be written.
        """
        ...

    async def load(self, session_id: str, agent_id: str) -> AgentState | None:
        """The latest state of ``agent_id`` in ``session_id``, or None."""
        ...

    async def flush(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109
        """Wait until every save was written (or ``timeout``); whether all were."""
        ...


@dataclass
class _Pending:
    state: AgentState
    body: tuple[dict[str, Any], dict[str, Any]]
    context: contextvars.Context
    attempted: asyncio.Future[bool]
    written: asyncio.Future[bool]


@dataclass
class _Slot:
    pending: _Pending | None = None
    writer: asyncio.Task[None] | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)


Writer = Callable[[AgentState, dict[str, Any], dict[str, Any]], Coroutine[Any, Any, None]]


def _follow(waiting: asyncio.Future[bool], leader: asyncio.Future[bool]) -> None:
    def settle(done: asyncio.Future[bool]) -> None:
        if not waiting.done():
            waiting.set_result(done.result())

    if not waiting.done():
        leader.add_done_callback(settle)


class _BackgroundWriter:
    """Latest-wins writes per key with one attempt in place and retries in the background."""

    def __init__(self, write: Writer, *, retry_delays: tuple[float, ...]) -> None:
        self._write = write
        self._delays = retry_delays
        self._slots: dict[tuple[str, str], _Slot] = {}

    async def save(
        self, state: AgentState, body: tuple[dict[str, Any], dict[str, Any]], *, durable: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        key = (state.session_id, state.agent_id)
        slot = self._slots.setdefault(key, _Slot())
        pending = _Pending(
            state, body, contextvars.copy_context(), loop.create_future(), loop.create_future()
        )
        superseded = slot.pending
        slot.pending = pending
        if superseded is not None:
            # The newer state carries everything the older one had: the older
            # one's waiters are answered by the newer one's fate.
            _follow(superseded.attempted, pending.attempted)
            _follow(superseded.written, pending.written)
        if slot.writer is None or slot.writer.done():
            slot.writer = asyncio.create_task(self._run(key, slot))
        slot.wake.set()
        if durable:
            if not await asyncio.shield(pending.written):
                raise SnapshotError(
                    f"the state of agent {state.agent_id!r} in session {state.session_id!r} "
                    "could not be saved"
                )
        else:
            await asyncio.shield(pending.attempted)

    async def _run(self, key: tuple[str, str], slot: _Slot) -> None:
        failures = 0
        while slot.pending is not None:
            pending = slot.pending
            slot.wake.clear()
            try:
                await asyncio.create_task(
                    self._write(pending.state, *pending.body), context=pending.context
                )
            except Exception as exc:
                failures += 1
                _log.warning(
                    "saving the agent state failed; retrying in the background",
                    session_id=key[0],
                    agent_id=key[1],
                    attempt=failures,
                    error=repr(exc),
                )
                if not pending.attempted.done():
                    pending.attempted.set_result(False)
                if failures > len(self._delays) and not pending.written.done():
                    # Durable waiters give up here; the write itself goes on.
                    pending.written.set_result(False)
                delay = self._delays[min(failures, len(self._delays)) - 1]
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(slot.wake.wait(), delay * random.uniform(0.8, 1.2))
                continue
            failures = 0
            if slot.pending is pending:
                slot.pending = None
            for future in (pending.attempted, pending.written):
                if not future.done():
                    future.set_result(True)
        self._slots.pop(key, None)

    async def flush(self, timeout: float) -> bool:  # noqa: ASYNC109
        writers = [slot.writer for slot in self._slots.values() if slot.writer is not None]
        if not writers:
            return True
        _, pending = await asyncio.wait(writers, timeout=timeout)
        return not pending


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    return value


class MemorySnapshotStore:
    """Snapshots in the memory service, full and slim side by side.

    Calls go through ``memory`` with the tenant and user of the envelope being
    handled (a bus handler's on-behalf-of headers), so a session's snapshots
    belong to its tenant and user.

    Args:
        memory: a started :class:`~disco.clients.MemoryClient`.
        full: the lossless serializer.
        slim: the bounded one (default :meth:`SlimConfig.standard`).
        retry_delays: seconds between background retries (the last repeats).
    """

    def __init__(
        self,
        memory: MemoryClient,
        *,
        full: FullSerializer | None = None,
        slim: SlimSerializer | None = None,
        retry_delays: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 5.0),
    ) -> None:
        self.memory = memory
        self.full = full or FullSerializer()
        self.slim = slim or SlimSerializer()
        self._writer = _BackgroundWriter(self._put, retry_delays=retry_delays)

    def _bodies(self, state: AgentState) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.full.serialize(state), self.slim.serialize(state)

    async def _put(self, state: AgentState, full: dict[str, Any], slim: dict[str, Any]) -> None:
        from disco.clients import ServiceError

        try:
            await self._put_once(state, full, slim)
            return
        except ServiceError as exc:
            if exc.status == 422 and exc.code == "nul_character":
                # Postgres cannot store NUL characters: keep them as U+FFFD.
                _log.warning(
                    "the agent state holds NUL characters; they are saved as U+FFFD",
                    session_id=state.session_id,
                    agent_id=state.agent_id,
                )
                full, slim = _without_nul(full), _without_nul(slim)
                try:
                    await self._put_once(state, full, slim)
                    return
                except ServiceError as again:
                    exc = again
            if exc.status != 413 or exc.code != "payload_too_large":
                raise
            # Too large to keep whole: keep the slim state; resume falls back to it.
            _log.warning(
                "the full agent state is too large for a snapshot; only the slim one is kept",
                session_id=state.session_id,
                agent_id=state.agent_id,
                details=exc.details,
            )
            omitted = {"format": FULL_FORMAT, "omitted": "too_large", "details": exc.details}
            await self._put_once(state, omitted, slim)

    async def _put_once(
        self, state: AgentState, full: dict[str, Any], slim: dict[str, Any]
    ) -> None:
        await self.memory.put_snapshot(
            state.session_id,
            state.agent_id,
            full=full,
            slim=slim,
            execution_id=state.execution_id,
            status=state.status.value,
            format_version=self.full.schema_version,
        )

    async def save(self, state: AgentState, *, durable: bool = False) -> None:
        await self._writer.save(state, self._bodies(state), durable=durable)

    async def load(self, session_id: str, agent_id: str) -> AgentState | None:
        snapshot = await self.memory.get_snapshot(session_id, agent_id)
        if snapshot is None:
            return None
        if "omitted" not in snapshot.full:
            try:
                return self.full.deserialize(snapshot.full)
            except StateSerializationError as exc:
                _log.warning(
                    "the full snapshot cannot be read; resuming from the slim one",
                    session_id=session_id,
                    agent_id=agent_id,
                    error=str(exc),
                )
        return self.slim.deserialize(snapshot.slim)

    async def flush(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109
        return await self._writer.flush(timeout)


class InMemorySnapshotStore:
    """Snapshots in this process (tests, benchmarks), serialized like the real ones."""

    def __init__(
        self, *, full: FullSerializer | None = None, slim: SlimSerializer | None = None
    ) -> None:
        self.full = full or FullSerializer()
        self.slim = slim or SlimSerializer()
        self.snapshots: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
        self.saves = 0

    async def save(self, state: AgentState, *, durable: bool = False) -> None:
        self.snapshots[(state.session_id, state.agent_id)] = (
            self.full.serialize(state),
            self.slim.serialize(state),
        )
        self.saves += 1

    async def load(self, session_id: str, agent_id: str) -> AgentState | None:
        stored = self.snapshots.get((session_id, agent_id))
        if stored is None:
            return None
        try:
            return self.full.deserialize(stored[0])
        except StateSerializationError:
            return self.slim.deserialize(stored[1])

    async def flush(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109
        return True
