"""Keeps one agent instance registered while it runs."""

from __future__ import annotations

import asyncio
import contextlib
import random

import structlog

from disco.clients._base import ServiceError, ServiceNotFoundError
from disco.clients.registry import RegistryClient
from disco_common.registry import AgentRegistration

__all__ = ["AgentRegistrar"]

_log = structlog.get_logger("disco.registry")

_DEFAULT_TTL_SECONDS = 30
_MIN_RETRY_SECONDS = 0.5


class AgentRegistrar:
    """Registers an agent, heartbeats, re-registers when needed, deregisters on stop.

    Behaviour:

    - :meth:`start` registers at once (when the registry is reachable) and starts
      the heartbeat loop; it returns even when the registry is down — the loop
      keeps trying, with backoff, until a registration succeeds.
    - every ``heartbeat_interval_seconds`` the instance heartbeats. A 404 means
      the registry forgot the agent (expiry purge, reset): it registers again at
      once. Any other failure (unreachable, 5xx) marks it unregistered; the next
      successful contact registers again, so a registry that comes back with an
      empty database learns the agent again.
    - :meth:`stop` ends the loop and deregisters this instance (a clean stop).
      An agent killed without ``stop`` simply expires after its TTL.

    Nothing here raises into the agent: every failure is logged.

    Args:
        client: a started :class:`~disco.clients.RegistryClient`.
        registration: what to register (its ``instance_id`` names this process in
            heartbeats and on deregistration).
        heartbeat_interval_seconds: time between heartbeats; by default a third of
            the registration's TTL (registry default 30 s), so two heartbeats may
            be lost before the agent expires.
    """

    def __init__(
        self,
        client: RegistryClient,
        registration: AgentRegistration,
        *,
        heartbeat_interval_seconds: float | None = None,
    ) -> None:
        if heartbeat_interval_seconds is not None and heartbeat_interval_seconds <= 0:
            raise ValueError("heartbeat_interval_seconds must be positive")
        ttl = registration.ttl_seconds or _DEFAULT_TTL_SECONDS
        if heartbeat_interval_seconds is not None and heartbeat_interval_seconds >= ttl:
            _log.warning(
                "heartbeat interval is not shorter than the TTL: the agent will flap",
                agent=registration.name,
                heartbeat_interval_seconds=heartbeat_interval_seconds,
                ttl_seconds=ttl,
            )
        self._client = client
        self._registration = registration
        self._interval = (
            heartbeat_interval_seconds if heartbeat_interval_seconds is not None else ttl / 3
        )
        self._registered = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def registration(self) -> AgentRegistration:
        """What this registrar registers."""
        return self._registration

    @property
    def registered(self) -> bool:
        """Whether the registry acknowledged this instance at the last contact."""
        return self._registered.is_set()

    async def update_metadata(self, **changes: str | None) -> None:
        """Register again with ``changes`` in the registration's metadata (None removes a
        key): what the instance says of itself (an agent whose consumer has had no
        partition, say). When the registry does not answer, the loop registers the new
        metadata at its next contact."""
        metadata = dict(self._registration.metadata)
        for key, value in changes.items():
            if value is None:
                metadata.pop(key, None)
            else:
                metadata[key] = value
        if metadata == self._registration.metadata:
            return
        self._registration = self._registration.model_copy(update={"metadata": metadata})
        if self._task is not None:
            await self._register()

    @property
    def running(self) -> bool:
        """Whether the heartbeat loop runs (between :meth:`start` and :meth:`stop`)."""
        return self._task is not None

    async def start(self) -> None:
        """Register now (if the registry answers) and start heartbeating. Idempotent."""
        if self._task is not None:
            return
        await self._register()
        self._task = asyncio.create_task(
            self._run(), name=f"disco-registrar-{self._registration.name}"
        )

    async def stop(self, *, deregister: bool = True) -> None:
        """Stop heartbeating and (by default) deregister this instance. Idempotent.

        Deregistering removes only this ``instance_id``; the registration (and the
        events it owns) goes with its last live instance.
        """
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if deregister and self._registered.is_set():
            registration = self._registration
            try:
                await self._client.deregister(
                    registration.agent_id, instance_id=registration.instance_id
                )
            except Exception as exc:
                _log.warning(
                    "deregistration failed; the registry will expire the agent after its TTL",
                    agent=registration.name,
                    agent_id=registration.agent_id,
                    error=str(exc),
                )
        self._registered.clear()

    async def wait_registered(self, timeout: float) -> bool:  # noqa: ASYNC109 - a caller's budget
        """Wait up to ``timeout`` seconds for a successful registration; whether it happened."""
        try:
            await asyncio.wait_for(self._registered.wait(), timeout=timeout)
        except TimeoutError:
            return False
        return True

    async def _register(self) -> bool:
        registration = self._registration
        try:
            record = await self._client.register(registration)
        except Exception as exc:
            self._registered.clear()
            level = _log.error if _permanent(exc) else _log.warning
            level(
                "registration failed; retrying",
                agent=registration.name,
                agent_id=registration.agent_id,
                error=str(exc),
            )
            return False
        self._registered.set()
        _log.info(
            "agent registered",
            agent=registration.name,
            agent_id=registration.agent_id,
            instance_id=registration.instance_id,
            expires_at=record.expires_at.isoformat(),
        )
        return True

    async def _heartbeat(self) -> None:
        registration = self._registration
        try:
            await self._client.heartbeat(
                registration.agent_id, instance_id=registration.instance_id
            )
        except ServiceNotFoundError:
            _log.warning(
                "the registry forgot this agent; registering again",
                agent=registration.name,
                agent_id=registration.agent_id,
            )
            self._registered.clear()
            await self._register()
        except Exception as exc:
            # Unreachable or failing: register again on the next contact, in case
            # the registry that comes back is a fresh one.
            self._registered.clear()
            _log.warning(
                "heartbeat failed",
                agent=registration.name,
                agent_id=registration.agent_id,
                error=str(exc),
            )

    async def _run(self) -> None:
        retry = _MIN_RETRY_SECONDS
        while True:
            if self._registered.is_set():
                await asyncio.sleep(self._interval)
                await self._heartbeat()
                retry = _MIN_RETRY_SECONDS
            else:
                # Jitter: many agents restarting with one registry do not stampede it.
                await asyncio.sleep(retry * random.uniform(0.8, 1.2))
                if not await self._register():
                    retry = min(retry * 2, self._interval)


def _permanent(exc: BaseException) -> bool:
    """A failure retrying cannot fix (a bad registration or token), worth an error log."""
    return isinstance(exc, ServiceError) and exc.status in {400, 401, 403, 413, 422}
