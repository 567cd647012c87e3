"""Identifier and name types shared by every contract.

They are plain ``str`` at run time; the constraints keep them safe to put in a
Kafka header, a URL path segment and a log line.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

__all__ = [
    "AgentName",
    "EventType",
    "Id",
    "SemVer",
    "TenantId",
    "TopicName",
    "TraceParent",
    "UtcDatetime",
    "new_id",
    "semver_sort_key",
    "utcnow",
]

Id = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"),
]
"""An id: a UUID or any token of letters, digits and ``._:@-`` (at most 200 characters)."""

TenantId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$"),
]
"""A tenant: letters, digits and ``._-``, at most 100 characters."""

EventType = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/_-]*$"),
]
"""An event type such as ``calculate.requested`` (letters, digits and ``._:/-_``).

The underscore is for the tool lifecycle family on ``notification-events``,
whose wire names are upper-case with underscores (``TOOL_APPROVED``)."""

AgentName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$"),
]
"""An agent's name; it is also its Kafka consumer group, so it keeps to ``[A-Za-z0-9._-]``."""

TopicName = Annotated[
    str, StringConstraints(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
]
"""A Kafka topic name as an agent writes it (without the environment prefix)."""

TraceParent = Annotated[
    str,
    StringConstraints(pattern=r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"),
]
"""A W3C trace-context ``traceparent`` header value."""

SemVer = Annotated[
    str,
    StringConstraints(
        max_length=100,
        pattern=(
            r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
            r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
        ),
    ),
]
"""A semantic version, ``MAJOR.MINOR.PATCH`` with optional pre-release and build."""


def _as_utc(value: datetime) -> datetime:
    # A time without a zone is read as UTC: every disco time is UTC on the wire.
    if value.tzinfo is UTC:  # the common case (``datetime.now(UTC)``), kept as is
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]
"""A datetime normalised to UTC (naive values are taken as UTC)."""


def new_id() -> str:
    """A fresh random id (UUID4, canonical text form)."""
    return str(uuid.uuid4())


def utcnow() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)
# Below every character an identifier may hold ([0-9A-Za-z-]) and below "~",
# so that a shorter pre-release sorts first and a release after its pre-releases.
_SEPARATOR = "!"
_RELEASE = "~"


def semver_sort_key(version: str) -> str:
    """A text key whose byte order (``COLLATE "C"``) is semver precedence.

    Numeric parts are zero-padded; a release sorts after its pre-releases;
    pre-release identifiers compare numerically when numeric (and lower than
    alphanumerics), lexically otherwise, and a shorter set sorts first. Build
    metadata does not count (semver §10).
    """
    match = _SEMVER.fullmatch(version)
    if match is None:
        raise ValueError(f"{version!r} is not a semantic version")
    major, minor, patch, pre = match.groups()
    key = f"{int(major):020d}.{int(minor):020d}.{int(patch):020d}"
    if pre is None:
        return key + _RELEASE
    parts = [f"0{int(part):020d}" if part.isdigit() else f"1{part}" for part in pre.split(".")]
    return key + _SEPARATOR + _SEPARATOR.join(parts)
