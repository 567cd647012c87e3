"""Canonical JSON and content hashes, so that equal content gets equal ids everywhere.

Used for payload-schema content hashes (re-posting the same schema is
idempotent, different content under one version is a conflict) and for
semantic memories upserted without an external id.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import JsonValue

__all__ = ["canonical_json", "json_hash", "text_hash"]


def canonical_json(value: JsonValue) -> bytes:
    """``value`` as compact JSON with sorted keys (UTF-8), the same bytes for equal values.

    Raises:
        ValueError: ``value`` holds NaN or an infinity, which JSON cannot carry.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def json_hash(value: JsonValue) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def text_hash(text: str) -> str:
    """SHA-256 (hex) of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode()).hexdigest()
