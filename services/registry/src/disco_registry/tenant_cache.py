"""Discovery answers kept by the service until a write or an expiry changes them.

A discovery at 10,000 agents costs PostgreSQL about a millisecond and a half
(the matches, their grouping and their schemas as JSON), on every call, while
the answer to "who consumes X?" changes only when agents register, leave,
revive or expire. So each instance keeps answers, and drops them exactly when
they may have changed:

- **an expiry**: the statement says how long until the first live instance
  among its matches expires (``fresh_seconds``); the answer is kept no longer;
- **a write on this instance** (register, deregister): dropped before the
  write's response, so that a caller reads its own writes here;
- **a write anywhere** (another instance, the sweeper, a heartbeat that
  revives, SQL by hand): triggers send ``NOTIFY registry_discovery`` at commit
  (migration ``registry_0007``, payload the tenant, or ``*`` when a public agent
  is involved), and this instance listens. Another instance's write reaches
  this cache when the notification arrives, a millisecond or so after commit;
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
from dataclasses import dataclass

__all__ = ["ALL_TENANTS", "CHANNEL", "DiscoveryCache", "DiscoveryKey"]

CHANNEL = "registry_discovery"
"""Where the registry's triggers notify discovery changes (migration ``registry_0007``)."""

ALL_TENANTS = "*"
"""The payload (and :meth:`DiscoveryCache.changed` argument) that drops every tenant's
answers: a public agent changed."""

DiscoveryKey = tuple[
    str, tuple[str, ...], str | None, str | None, str | None, int
]  # tenant, capabilities, consumed event, produced event, text, limit


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    until: float  # time.monotonic() deadline


class DiscoveryCache:
    """Discovery answers per tenant (see the module docstring)."""

    def __init__(self, *, max_bytes: int, max_age_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.max_age_seconds = max_age_seconds
        self._tenants: dict[str, OrderedDict[DiscoveryKey, _Answer]] = {}
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
        """The size of the answers kept: characters of JSON text (a byte each in ASCII)."""
        return self._bytes

    def get(self, key: DiscoveryKey) -> str | None:
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
        return answer.text

    def ticket(self) -> int:
        """Take before asking the database; hand to :meth:`put` with its answer."""
        self.asked += 1
        return self._generation

    def put(
        self,
        key: DiscoveryKey,
        ticket: int,
        text: str,
        fresh_seconds: float | None,
        *,
        asked_at: float,
    ) -> None:
        """Keep ``text`` for ``key`` unless anything changed since ``ticket`` was taken.

        ``asked_at`` is the :func:`time.monotonic` time the question went to the
        database (before it read ``now()``): ``fresh_seconds`` counts from there.
        """
        if not self.trusted or ticket != self._generation or len(text) > self.max_bytes:
            return
        lifetime = self.max_age_seconds
        if fresh_seconds is not None:
            lifetime = min(lifetime, fresh_seconds)
        if lifetime <= 0:
            return
        answers = self._tenants.setdefault(key[0], OrderedDict())
        replaced = answers.pop(key, None)
        if replaced is not None:
            self._bytes -= len(replaced.text)
        answers[key] = _Answer(text, asked_at + lifetime)
        self._bytes += len(text)
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
            self._bytes -= sum(len(answer.text) for answer in answers.values())

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

    def _forget(self, answers: OrderedDict[DiscoveryKey, _Answer], key: DiscoveryKey) -> None:
        self._bytes -= len(answers.pop(key).text)
        if not answers:
            self._tenants.pop(key[0], None)

    def _evict_oldest(self) -> None:
        # The least recently used answer of the tenant whose oldest answer is oldest
        # would be exact; the first tenant's is close enough and O(1).
        tenant_id = next(iter(self._tenants))
        answers = self._tenants[tenant_id]
        self._forget(answers, next(iter(answers)))
