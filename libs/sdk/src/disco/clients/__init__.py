"""Typed clients of the disco services (httpx; DTOs from ``disco_common``).

:class:`ServiceClient` is the shared base: bearer tokens, on-behalf-of headers
inside a bus handler (or an :func:`acting_for` block), the stable error shape
as :class:`ServiceError` subclasses, retries for idempotent calls. Token providers
(:class:`StaticToken`, :class:`DevTokenMinter`) live in :mod:`disco.auth` and are
re-exported here.
"""

from disco.auth import DevTokenMinter, StaticToken, TokenProvider
from disco.clients._base import (
    ServiceAuthError,
    ServiceClient,
    ServiceConflictError,
    ServiceError,
    ServiceNotFoundError,
    ServiceUnavailableError,
    ServiceValidationError,
    acting_for,
)
from disco.clients.memory import DedupAnswer, MemoryClient
from disco.clients.registry import RegistryClient
from disco.clients.tracker import TrackerClient
from disco.settings import ServiceClientSettings

__all__ = [
    "DedupAnswer",
    "DevTokenMinter",
    "MemoryClient",
    "RegistryClient",
    "ServiceAuthError",
    "ServiceClient",
    "ServiceClientSettings",
    "ServiceConflictError",
    "ServiceError",
    "ServiceNotFoundError",
    "ServiceUnavailableError",
    "ServiceValidationError",
    "StaticToken",
    "TokenProvider",
    "TrackerClient",
    "acting_for",
]
