"""Answers kept per tenant by the service until a write or an expiry changes them.

The registry's reads (discovery, the AsyncAPI document) change only when
agents register, leave, revive or expire, or when a schema version is added,
while they are asked far more often. So each instance keeps answers, and drops
them exactly when they may have changed:

- **an expiry**: the read says how long until the first live instance among
  what it saw expires (``fresh_seconds``); the answer is kept no longer;
- **a write on this instance** (register, deregister, a schema version): dropped
  before the write's response, so that a caller reads its own writes here;
- **a write anywhere** (another instance, the sweeper, a heartbeat that
  revives, SQL by hand): triggers send ``NOTIFY registry_discovery`` at commit
  (migrations ``registry_0007`` and ``registry_0008``), and this instance
  listens (:mod:`disco_registry.changes`). Another instance's write reaches
  the cache when the notification arrives, a millisecond or so after commit;
- **while not listening** (not yet connected, or the connection lost) nothing is
  kept, and everything kept before is dropped when listening starts again.

An answer computed while a change arrived is not kept (it may predate it): each
change moves a generation counter, and an answer is stored only under the
generation it started in. ``max_age_seconds`` bounds every answer's life on top
of all this; ``max_bytes`` bounds the memory (oldest answers go first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ALL_TENANTS", "CHANNEL", "TenantCache"]

CHANNEL = "registry_discovery"
"""Where the registry's triggers notify changes (migrations ``registry_0007``, ``_0008``)."""

ALL_TENANTS = "*"
"""The payload (and :meth:`TenantCache.changed` argument) that drops every tenant's
answers: a public agent changed."""

K = TypeVar("K", bound=tuple[Hashable, ...])
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class _Answer(Generic[V]):
    value: V
    size: int
    until: float  # time.monotonic() deadline


class TenantCache(Generic[K, V]):
    """Answers per tenant (see the module docstring). A key's first item is its tenant;
    ``size_of`` says how much of ``max_bytes`` an answer takes."""

    def __init__(
        self, *, max_bytes: int, max_age_seconds: float, size_of: Callable[[V], int]
    ) -> None:
        self.max_bytes = max_bytes
        self.max_age_seconds = max_age_seconds
        self._size_of = size_of
        self._tenants: dict[object, OrderedDict[K, _Answer[V]]] = {}
        self._bytes = 0
        self._generation = 0
        self._listening = False
        self.served = 0  # answers served from the cache
        self.asked = 0  # answers the database was asked for

    @property
    def enabled(self) -> bool:
        """Whether answers are kept at all (a positive size and age)."""
        return self.max_bytes > 0 and self.max_age_seconds > 0

    @property
    def trusted(self) -> bool:
        """Whether answers are served and kept now: enabled and listening."""
        return self._listening and self.enabled

    @property
    def size_bytes(self) -> int:
        """The size of the answers kept, as ``size_of`` measures them."""
        return self._bytes

    def get(self, key: K) -> V | None:
        """The kept answer for ``key``, if it is still good."""
        answers = self._tenants.get(key[0])
        if answers is None:
            return None
        answer = answers.get(key)
        if answer is None:
            return None
        if time.monotonic() >= answer.until:
            self._forget(answers, key)
            return None
        answers.move_to_end(key)
        self.served += 1
        return answer.value

    def ticket(self) -> int:
        """Take before asking the database; hand to :meth:`put` with its answer."""
        self.asked += 1
        return self._generation

    def put(
        self,
        key: K,
        ticket: int,
        value: V,
        fresh_seconds: float | None,
        *,
        asked_at: float,
    ) -> None:
        """Keep ``value`` for ``key`` unless anything changed since ``ticket`` was taken.

        ``asked_at`` is the :func:`time.monotonic` time the question went to the
        database (before it read ``now()``): ``fresh_seconds`` counts from there.
        """
        size = self._size_of(value)
        if not self.trusted or ticket != self._generation or size > self.max_bytes:
            return
        lifetime = self.max_age_seconds
        if fresh_seconds is not None:
            lifetime = min(lifetime, fresh_seconds)
        if lifetime <= 0:
            return
        answers = self._tenants.setdefault(key[0], OrderedDict())
        replaced = answers.pop(key, None)
        if replaced is not None:
            self._bytes -= replaced.size
        answers[key] = _Answer(value, size, asked_at + lifetime)
        self._bytes += size
        while self._bytes > self.max_bytes:
            self._evict_oldest()

    def changed(self, tenant_id: str) -> None:
        """Drop ``tenant_id``'s answers (every tenant's for :data:`ALL_TENANTS`)."""
        self._generation += 1
        if tenant_id == ALL_TENANTS:
            self._tenants.clear()
            self._bytes = 0
            return
        answers = self._tenants.pop(tenant_id, None)
        if answers is not None:
            self._bytes -= sum(answer.size for answer in answers.values())

    def wrote(self, tenant_id: str, *, public: bool) -> None:
        """A write on this instance committed: drop what it may change, before its
        response (the notification of it comes later)."""
        self.changed(ALL_TENANTS if public else tenant_id)

    def listening(self) -> None:
        """Notifications are heard from now on: start afresh and keep answers."""
        self.changed(ALL_TENANTS)
        self._listening = True

    def lost(self) -> None:
        """Notifications may be missed from now on: drop everything, keep nothing."""
        self._listening = False
        self.changed(ALL_TENANTS)

    def _forget(self, answers: OrderedDict[K, _Answer[V]], key: K) -> None:
        self._bytes -= answers.pop(key).size
        if not answers:
            self._tenants.pop(key[0], None)

    def _evict_oldest(self) -> None:
        # The least recently used answer of the tenant whose oldest answer is oldest
        # would be exact; the first tenant's is close enough and O(1).
        tenant_id = next(iter(self._tenants))
        answers = self._tenants[tenant_id]
        self._forget(answers, next(iter(answers)))
