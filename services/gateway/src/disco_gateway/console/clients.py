"""The services the console reads, called over HTTP with the signed-in person's own token.

The gateway never reads another service's tables: the console asks the
tracker, the registry and the memory service through the SDK's typed clients.
Each client is made once per gateway instance; the token it sends is the one
of the request being served (:func:`forwarding`), so every service scopes the
answer to that person's tenant and user exactly as it would for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import httpx

from disco.clients import MemoryClient, RegistryClient, TrackerClient
from disco_gateway.console.documents import BusDocuments
from disco_gateway.settings import GatewaySettings

__all__ = ["ConsoleClients", "ForwardedToken", "console_clients", "forwarding"]

_TOKEN: ContextVar[str | None] = ContextVar("disco_gateway_console_token", default=None)


class ForwardedToken:
    """A token provider handing out the token of the request being served.

    Raises:
        RuntimeError: a call outside :func:`forwarding`: the console never
            calls a service with a token of its own.
    """

    async def token(self) -> str:
        token = _TOKEN.get()
        if token is None:
            raise RuntimeError("a console call outside `forwarding(token)`: whose token is it?")
        return token


@contextmanager
def forwarding(token: str) -> Iterator[None]:
    """Send ``token`` with the console's service calls made inside the block."""
    reset = _TOKEN.set(token)
    try:
        yield
    finally:
        _TOKEN.reset(reset)


@dataclass(frozen=True)
class ConsoleClients:
    """The started clients the console uses (see the module docs)."""

    tracker: TrackerClient
    registry: RegistryClient
    memory: MemoryClient
    probe: httpx.AsyncClient
    """Unauthenticated: for the services' ``/readyz``."""
    bus_documents: BusDocuments = field(default_factory=BusDocuments)
    """The AsyncAPI documents the Bus page read last, revalidated by ETag."""


@asynccontextmanager
async def console_clients(settings: GatewaySettings) -> AsyncIterator[ConsoleClients]:
    """The console's clients, started, for the lifetime of the block."""
    token = ForwardedToken()
    # One try only: a page waits for the answer, and a person can reload.
    tracker = TrackerClient(settings.tracker_url, token=token, retries=0, timeout_seconds=10)
    registry = RegistryClient(settings.registry_url, token=token, retries=0, timeout_seconds=10)
    memory = MemoryClient(settings.memory_url, token=token, retries=0, timeout_seconds=10)
    async with AsyncExitStack() as stack:
        for client in (tracker, registry, memory):
            await stack.enter_async_context(client)
        probe = await stack.enter_async_context(
            httpx.AsyncClient(timeout=settings.readiness_timeout_seconds + 1)
        )
        yield ConsoleClients(tracker=tracker, registry=registry, memory=memory, probe=probe)
