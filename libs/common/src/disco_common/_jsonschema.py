"""JSON Schema documents: metaschema check and payload validation (pure, private).

Checking a document against its metaschema costs about a millisecond, and
EventDefinitions arrive in every discovery answer, so checks are cached by the
document's canonical JSON. Formats (``email``, ``date-time``...) stay
annotations, as the 2020-12 specification says by default: whether they would be
asserted must not depend on which optional packages happen to be installed.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any

import pydantic_core
from jsonschema import exceptions as js_exceptions
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for
from pydantic import AfterValidator, Field, JsonValue
from referencing.exceptions import Unresolvable

from disco_common.canonical import canonical_json

__all__ = [
    "JsonSchemaDocument",
    "check_json_schema",
    "iter_violations",
]

_CACHE_SIZE = 2048
_MESSAGE_MAX_CHARS = 1000


_UNKNOWN: Any = object()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _validator_class(canonical: bytes) -> type[Validator]:
    document = json.loads(canonical)
    declared = document.get("$schema")
    if declared is None:
        cls: type[Validator] = Draft202012Validator
    elif not isinstance(declared, str):
        raise ValueError("$schema must be a string: the URI of a JSON Schema draft")
    else:
        # validator_for falls back to its default for an unknown $schema; a
        # sentinel tells "unknown" apart instead of validating with a wrong draft.
        found = validator_for(document, default=_UNKNOWN)
        if found is _UNKNOWN:
            raise ValueError(
                f"unknown $schema {declared!r}: use a JSON Schema draft URI such as "
                "'https://json-schema.org/draft/2020-12/schema' (or omit $schema for 2020-12)"
            )
        cls = found
    try:
        cls.check_schema(document)
    except js_exceptions.SchemaError as exc:
        where = _pointer(exc.absolute_path) or "the root"
        raise ValueError(f"not a valid JSON Schema at {where}: {_short(exc.message)}") from None
    return cls


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _validator(canonical: bytes) -> Validator:
    return _validator_class(canonical)(json.loads(canonical))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _validator_of_written(written: bytes) -> Validator:
    # Keyed as ``_checked`` is: every payload check repeats its schema, and writing it
    # with pydantic-core costs a fraction of writing the canonical form in Python.
    return _validator(canonical_json(json.loads(written)))


def _written(document: dict[str, JsonValue]) -> bytes:
    """``document`` as pydantic-core writes it (NaN and infinities as such, so that they
    fail the canonical form's check)."""
    try:
        return pydantic_core.to_json(document, inf_nan_mode="constants")
    except pydantic_core.PydanticSerializationError as exc:
        raise ValueError(f"not a JSON document: {exc}") from None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _checked(written: bytes) -> None:
    # ``written`` is the document as pydantic-core writes it, keys in the order given:
    # a cheap key for the documents that arrive again and again (every registration
    # of an agent repeats its schemas); the check itself goes by the canonical form.
    _validator_class(canonical_json(json.loads(written)))


def check_json_schema(document: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Return ``document`` if it is a valid JSON Schema, else raise ValueError saying where.

    The draft is taken from ``$schema`` (Draft 2020-12 when absent).
    """
    _checked(_written(document))
    return document


JsonSchemaDocument = Annotated[
    dict[str, JsonValue],
    Field(
        description="A JSON Schema document (Draft 2020-12 unless `$schema` names another draft).",
    ),
    AfterValidator(check_json_schema),
]
"""A JSON Schema document, checked against its draft's metaschema."""


def _short(message: str) -> str:
    if len(message) <= _MESSAGE_MAX_CHARS:
        return message
    return message[: _MESSAGE_MAX_CHARS - 3] + "..."


def _pointer(parts: Any) -> str:
    # RFC 6901: "~" and "/" inside a key are escaped.
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def iter_violations(
    document: dict[str, JsonValue], payload: JsonValue
) -> list[tuple[str, str, str, str]]:
    """Every way ``payload`` breaks ``document``: (path, message, validator, schema_path).

    Paths are JSON Pointers. Sorted by path, then by keyword. A ``$ref`` that
    cannot be resolved (remote references are never fetched) is one violation.

    Raises:
        ValueError: ``document`` is not a valid JSON Schema.
    """
    validator = _validator_of_written(_written(document))
    try:
        errors = list(validator.iter_errors(payload))
    except Unresolvable as exc:
        return [("", f"unresolvable reference: {exc}", "$ref", "")]
    found = [
        (
            _pointer(error.absolute_path),
            _short(error.message),
            str(error.validator),
            _pointer(error.absolute_schema_path),
        )
        for error in errors
    ]
    found.sort(key=lambda item: (item[0], item[2], item[3]))
    return found
