"""What the memory domains share: JSON sizes, versions and ETags, vectors.

Private to the service (each domain imports from here; nothing here imports a
domain).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np
import pydantic_core
from fastapi import Header
from numpy.typing import NDArray
from pgvector import Vector
from pydantic import BaseModel, JsonValue, ValidationError
from starlette.responses import Response

from disco_service import Conflict, DiscoHTTPError, PayloadTooLarge, UnprocessableEntity

__all__ = [
    "EmbeddingUnavailable",
    "IfMatch",
    "NulCharacter",
    "Stored",
    "VersionConflict",
    "as_vector",
    "encoded_json",
    "expected_version",
    "limited_json",
    "limited_model_json",
    "model_errors",
    "set_etag",
    "stored_record",
]

_ETAG = re.compile(r'^\s*(?:W/)?"(\d{1,9})"\s*$')


class VersionConflict(Conflict):
    """409: a write named a version that is no longer (or not yet) the stored one."""

    code = "version_conflict"

    def __init__(self, what: str, *, expected: int, current: int | None) -> None:
        if current is None:
            message = (
                f"{what} does not exist, so it cannot be at version {expected}; "
                "write with expected_version 0 (or none) to create it"
            )
        elif expected == 0:
            message = f"{what} already exists (version {current}); read it and write again"
        else:
            message = (
                f"{what} is at version {current}, not {expected}: someone else wrote it; "
                "read it again and retry"
            )
        super().__init__(
            message, details={"expected_version": expected, "current_version": current}
        )


@dataclass(frozen=True, slots=True)
class Stored:
    """What a context save function (``memory.store_*_context_as``) did: ``stored``
    (``record``: the record's JSON text), ``claimed`` (``detail``: id -> the owner
    holding it) or ``conflict`` (``detail``: ``current_version``, None when none)."""

    outcome: str
    detail: dict[str, JsonValue]
    record: str | None

    @classmethod
    def of(cls, row: asyncpg.Record) -> Stored:
        """From the function's row (``o_outcome``, ``o_detail`` as text, ``o_record``)."""
        detail = row["o_detail"]
        return cls(
            outcome=row["o_outcome"],
            detail=pydantic_core.from_json(detail) if detail is not None else {},
            record=row["o_record"],
        )


def stored_record(
    stored: Stored,
    *,
    what: str,
    expected: int | None,
    claimed: type[Conflict],
    ids: str,
    owner: str,
) -> str:
    """The saved record's JSON text.

    Raises:
        ``claimed``: another ``owner`` holds some of the context's ``ids`` (their
            names, e.g. "correlation ids"); VersionConflict: ``expected`` was not
            the stored version of ``what``.
    """
    if stored.outcome == "claimed":
        holders = stored.detail
        raise claimed(
            f"these {ids} already belong to other {owner}s: "
            + ", ".join(f"{held} ({owner} {by})" for held, by in sorted(holders.items())),
            details={"claimed": holders},
        )
    if stored.outcome == "conflict":
        assert expected is not None  # an unguarded save always writes
        current = stored.detail.get("current_version")
        raise VersionConflict(
            what, expected=expected, current=current if isinstance(current, int) else None
        )
    assert stored.record is not None
    return stored.record


def encoded_json(value: Any) -> str:
    """``value`` as compact JSON text (what is stored and what the size limits measure)."""
    return pydantic_core.to_json(value).decode()


_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""A NUL character as JSON encodes it (``\\u0000`` after an even run of backslashes)."""


class NulCharacter(UnprocessableEntity):
    """422: JSON holding a NUL character, which Postgres cannot store."""

    code = "nul_character"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} contains a NUL character (\\u0000), which Postgres cannot store; "
            "remove it or replace it (e.g. with U+FFFD)",
            details={"reason": "nul_character"},
        )


def _stored_json(raw: bytes, *, limit: int, what: str) -> str:
    if len(raw) > limit:
        raise PayloadTooLarge(
            f"{what} is {len(raw)} bytes encoded; the limit is {limit} bytes",
            details={"size_bytes": len(raw), "limit_bytes": limit},
        )
    if b"u0000" in raw and _NUL.search(raw):
        raise NulCharacter(what)
    return raw.decode()


def limited_json(value: Any, *, limit: int, what: str) -> str:
    """``value`` as JSON text; 413 when larger than ``limit`` bytes, 422 when it holds a NUL."""
    return _stored_json(pydantic_core.to_json(value), limit=limit, what=what)


def limited_model_json(model: BaseModel, *, limit: int, what: str) -> str:
    """``model`` as JSON text; 413 when larger than ``limit`` bytes, 422 when it holds a NUL."""
    return _stored_json(model.__pydantic_serializer__.to_json(model), limit=limit, what=what)


def _if_match_version(if_match: str | None) -> int | None:
    if if_match is None:
        return None
    if if_match.strip() == "*":
        raise UnprocessableEntity(
            'If-Match: * is not supported; send the ETag you read, e.g. If-Match: "3"'
        )
    found = _ETAG.fullmatch(if_match)
    if found is None:
        raise UnprocessableEntity(
            f'If-Match must be one ETag as this service sends it, e.g. "3"; got {if_match!r}'
        )
    return int(found.group(1))


IfMatch = Header(
    alias="If-Match",
    description='The ETag you read (e.g. `"3"`): write only if it is still current, else 409.',
)


def expected_version(body_version: int | None, if_match: str | None) -> int | None:
    """The version a write must find: from ``expected_version`` or the ``If-Match`` header.

    Raises:
        UnprocessableEntity: the header is malformed, or it and the body disagree.
    """
    header_version = _if_match_version(if_match)
    if header_version is None:
        return body_version
    if body_version is not None and body_version != header_version:
        raise UnprocessableEntity(
            f"If-Match names version {header_version} but expected_version is {body_version}; "
            "send one of them"
        )
    return header_version


def set_etag(response: Response, version: int) -> None:
    """Send the record's version as its ``ETag``."""
    response.headers["ETag"] = f'"{version}"'


def as_vector(vector: Sequence[float] | NDArray[Any]) -> Vector:
    """A vector as a query parameter: sent in pgvector's binary form (4 bytes a
    dimension) by the codec every pooled connection registers (see
    :func:`disco_memory.semantic.repository.configure_search`), not as text."""
    return Vector(vector if isinstance(vector, np.ndarray) else list(vector))


def model_errors(exc: ValidationError) -> list[Mapping[str, Any]]:
    """A pydantic error as the violations list of a 422."""
    return [
        {
            "location": [str(part) for part in error.get("loc", ())],
            "message": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in exc.errors()
    ]


class EmbeddingUnavailable(DiscoHTTPError):
    """503: the embedding provider could not embed the text (nothing was written)."""

    status_code = 503
    code = "embedding_unavailable"
