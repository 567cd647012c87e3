"""Checks payloads against the schemas agents registered for their events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from disco.clients.registry import RegistryClient
from disco_common.registry import (
    EventRecord,
    SchemaRef,
    SchemaViolation,
    validate_payload,
)

__all__ = ["PayloadValidationError", "PayloadValidator"]

_log = structlog.get_logger("disco.registry")

_MESSAGE_VIOLATIONS = 10


class PayloadValidationError(ValueError):
    """A payload does not match the schema registered for its event type.

    Attributes:
        event_type: the event whose payload failed.
        violations: every violation found (path as a JSON Pointer, message, keyword).
        schema_ref: the registered schema version, when the event names one.
        owner_agent_id: the agent whose definition holds the schema.
        truncated: more violations exist than are listed.
    """

    def __init__(
        self,
        event_type: str,
        violations: list[SchemaViolation],
        *,
        schema_ref: SchemaRef | None,
        owner_agent_id: str,
        truncated: bool = False,
    ) -> None:
        self.event_type = event_type
        self.violations = violations
        self.schema_ref = schema_ref
        self.owner_agent_id = owner_agent_id
        self.truncated = truncated
        source = (
            f"schema {schema_ref}" if schema_ref is not None else "the inline schema"
        ) + f" registered by agent {owner_agent_id!r}"
        count = f"{len(violations)}{'+' if truncated else ''}"
        lines = [
            f"  - {violation.path or '(root)'}: {violation.message}"
            for violation in violations[:_MESSAGE_VIOLATIONS]
        ]
        if len(violations) > _MESSAGE_VIOLATIONS:
            lines.append(f"  ... and {len(violations) - _MESSAGE_VIOLATIONS} more")
        super().__init__(
            f"payload of {event_type!r} does not match {source} ({count} violation(s)); "
            "fix the payload (discover the agent to see its request schema):\n" + "\n".join(lines)
        )


@dataclass(frozen=True)
class _Entry:
    record: EventRecord | None
    expires_at: float


class PayloadValidator:
    """Validates payloads against the JSON Schema registered for their event type.

    Lookup: ``GET /v1/events/{event_type}`` — the definition that counts for the
    caller's tenant (its own before a public one, a live owner's first), with the
    schema resolved inline. Answers are cached for ``cache_ttl_seconds``, "no
    definition" too, so a busy publisher asks the registry about each event type
    at most once per TTL; concurrent first lookups share one request.

    - no definition, or a definition without a schema: the payload passes;
    - a schema: every violation is listed in a :class:`PayloadValidationError`;
    - the registry cannot be reached: the last known answer is used even if
      stale; with none, the payload passes and a warning is logged (an outage
      of the registry must not stop agents from working).

    Use ``await validator.validate(event_type, data)``; the instance is also a
    ``(event_type, data)`` coroutine callable, as ``BusClient.set_request_validator``
    expects.

    Args:
        client: a started :class:`~disco.clients.RegistryClient`.
        cache_ttl_seconds: how long an answer of the registry is reused.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        client: RegistryClient,
        *,
        cache_ttl_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if cache_ttl_seconds < 0:
            raise ValueError("cache_ttl_seconds must not be negative")
        self._client = client
        self._ttl = cache_ttl_seconds
        self._clock = clock
        self._cache: dict[str, _Entry] = {}
        self._inflight: dict[str, asyncio.Future[EventRecord | None]] = {}

    async def __call__(self, event_type: str, data: Any) -> None:
        await self.validate(event_type, data)

    async def validate(self, event_type: str, data: Any) -> None:
        """Check ``data`` against the schema registered for ``event_type``.

        Raises:
            PayloadValidationError: ``data`` breaks the schema (every violation listed).
        """
        record = await self.definition(event_type)
        if record is None or record.json_schema is None:
            return
        try:
            result = validate_payload(record.json_schema, data, schema_ref=record.schema_ref)
        except ValueError as exc:
            # The registry checks schemas on registration; a bad one here is its bug,
            # and must not stop the publisher.
            _log.warning("registered schema is not usable", event_type=event_type, error=str(exc))
            return
        if not result.valid:
            raise PayloadValidationError(
                event_type,
                result.violations,
                schema_ref=record.schema_ref,
                owner_agent_id=record.owner_agent_id,
                truncated=result.truncated,
            )

    async def definition(self, event_type: str) -> EventRecord | None:
        """The registered definition of ``event_type`` (cached), or None."""
        now = self._clock()
        cached = self._cache.get(event_type)
        if cached is not None and cached.expires_at > now:
            return cached.record
        task = self._inflight.get(event_type)
        if task is None:
            # One request per event type at a time; later callers share its answer.
            task = asyncio.ensure_future(self._fetch(event_type, cached))
            self._inflight[event_type] = task
            task.add_done_callback(lambda _: self._inflight.pop(event_type, None))
        # Shielded: one caller being cancelled does not cancel the others' lookup.
        return await asyncio.shield(task)

    def invalidate(self, event_type: str | None = None) -> None:
        """Forget the cached answer for ``event_type`` (every answer when None)."""
        if event_type is None:
            self._cache.clear()
        else:
            self._cache.pop(event_type, None)

    async def _fetch(self, event_type: str, stale: _Entry | None) -> EventRecord | None:
        try:
            record = await self._client.get_event(event_type)
        except Exception as exc:
            _log.warning(
                "cannot look up the registered schema; "
                + ("using the last known one" if stale else "not validating"),
                event_type=event_type,
                error=str(exc),
            )
            return stale.record if stale is not None else None
        self._cache[event_type] = _Entry(record=record, expires_at=self._clock() + self._ttl)
        return record
