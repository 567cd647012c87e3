"""Payload schemas as the document carries them: moved under ``components.schemas``,
named (``$id``), with their internal references pointing into the document, and
the examples that fit them.

A registered JSON Schema is a document of its own: its ``$ref``s (``#/$defs/X``,
what pydantic writes for nested models) point into itself. Inside the AsyncAPI
document every ``#`` means the document's root, so each local reference is
rewritten to the schema's new place (``#/components/schemas/<key>/$defs/X``).
A reference that points elsewhere (a remote URL) cannot be followed by the
registry either (payloads are validated without fetching anything); it is kept
as ``x-disco-unresolved-ref`` and the subschema accepts any value, so that no
AsyncAPI tool tries to fetch it.

``$schema`` is left out: the document's schemas are AsyncAPI Schema Objects (a
superset of JSON Schema draft 07), and the keywords of later drafts that disco's
registry accepts (``$defs``, ``prefixItems``...) read there as they are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urldefrag, urljoin

import pydantic_core
from jsonschema.validators import Draft7Validator, Draft202012Validator, validator_for

from disco_common.system_events import SYSTEM_EVENT_DATA, SystemEventType

__all__ = [
    "DISCO_VERSION",
    "MAX_EXAMPLES",
    "document_schema",
    "fitting_examples",
    "inline_schema_id",
    "platform_schema",
    "platform_schema_id",
    "registered_schema_id",
    "type_name",
]

MAX_EXAMPLES = 5
"""Examples kept per message (the first that fit)."""

_WORDS = re.compile(r"[A-Za-z0-9]+")


def _disco_version() -> str:
    try:
        return version("disco-registry")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0.0.0"


DISCO_VERSION = _disco_version()
"""The version of the platform (its own schemas are versioned with it)."""


def registered_schema_id(name: str, version: str) -> str:
    """The ``$id`` of a registered payload schema version (``name@version``, the form of an
    envelope's ``payloadschema``)."""
    return f"urn:disco:schema:{name}@{version}"


def inline_schema_id(agent: str, agent_version: str, event_type: str) -> str:
    """The ``$id`` of a schema an agent's registration gives inline for ``event_type``."""
    return f"urn:disco:agent:{agent}@{agent_version}:event:{event_type}"


def platform_schema_id(event_type: str) -> str:
    """The ``$id`` of disco's own schema of a system event type."""
    return f"urn:disco:platform@{DISCO_VERSION}:event:{event_type}"


@functools.cache
def platform_schema(event_type: SystemEventType) -> dict[str, Any]:
    """The JSON Schema of a system event's payload, from its model (what the tracker reads)."""
    return SYSTEM_EVENT_DATA[event_type].model_json_schema()


def type_name(name: str) -> str:
    """``name`` (an event type or schema name) as a type name: ``order.shipped`` ->
    ``OrderShipped``."""
    return "".join(part[:1].upper() + part[1:] for part in _WORDS.findall(name)) or "Payload"


def document_schema(
    schema: Mapping[str, Any], *, key: str, schema_id: str, title: str
) -> dict[str, Any]:
    """``schema`` placed at ``#/components/schemas/<key>``: a copy with ``$id`` set,
    ``$schema`` dropped, every reference rewritten (see the module docstring), and
    ``title`` when it has none (code generators name their types after it; otherwise
    they would use the ``$id``)."""
    own = schema.get("$id")
    base = own if isinstance(own, str) else ""
    here = f"#/components/schemas/{key}"
    copied = _rewrite(schema, base=base, here=here)
    copied.pop("$schema", None)
    copied.pop("$id", None)
    copied.setdefault("title", title)
    return {"$id": schema_id, **copied}


def _rewrite(value: Any, *, base: str, here: str) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if name == "$ref" and isinstance(item, str):
                local = _local_pointer(item, base)
                if local is None:
                    out["x-disco-unresolved-ref"] = item
                else:
                    out["$ref"] = here + local
            else:
                out[name] = _rewrite(item, base=base, here=here)
        return out
    if isinstance(value, list):
        return [_rewrite(item, base=base, here=here) for item in value]
    return value


def _local_pointer(ref: str, base: str) -> str | None:
    """The JSON Pointer (``""`` or ``/...``) ``ref`` names inside its own schema, or None
    when it points elsewhere (another document, a named anchor)."""
    if ref.startswith("#"):
        fragment = ref[1:]
    else:
        if not base:
            return None
        target, fragment = urldefrag(urljoin(base, ref))
        if target != urldefrag(base)[0]:
            return None
    if fragment and not fragment.startswith("/"):
        return None  # a plain-name anchor: no pointer to rewrite it to
    return fragment


def fitting_examples(schema: Mapping[str, Any]) -> list[Any]:
    """The schema's own ``examples`` that fit it, under its draft and under draft 07
    (AsyncAPI tools check examples against the payload as a draft 07 schema).

    Checking costs a millisecond or so a schema, on every build of a document, while
    schemas rarely change: the answer is kept by the schema's JSON text (the database
    gives a schema's keys in the same order every time).
    """
    given = schema.get("examples")
    if not isinstance(given, list) or not given:
        return []
    fitting: list[Any] = pydantic_core.from_json(_fitting(pydantic_core.to_json(schema)))
    return fitting


@functools.lru_cache(maxsize=4096)
def _fitting(text: bytes) -> bytes:
    return pydantic_core.to_json(_check_examples(pydantic_core.from_json(text)))


def _check_examples(schema: dict[str, Any]) -> list[Any]:
    # The registry checked the schema against its metaschema when it was registered:
    # the validators are built without checking it again (the check is what costs).
    own = validator_for(schema, default=Draft202012Validator)
    fitting: list[Any] = []
    try:
        validators = [own(schema), Draft7Validator(schema)]
        for example in schema["examples"]:
            if len(fitting) == MAX_EXAMPLES:
                break
            if all(validator.is_valid(example) for validator in validators):
                fitting.append(example)
    except Exception:  # a reference jsonschema cannot follow: no examples from it
        return []
    return fitting
