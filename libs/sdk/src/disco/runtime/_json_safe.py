"""``to_json_safe``: the one conversion every runtime and UI payload goes through (seed 003).

Whatever a tool returns or raises, whatever an application puts in metadata,
the runtime must be able to publish it and store it. This turns any Python
value into plain JSON data (``dict``/``list``/``str``/``int``/``float``/
``bool``/``None``) that ``json.dumps`` accepts with ``allow_nan=False`` and
that encodes as UTF-8, within a size bound, and it never raises.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from collections.abc import Mapping, Set
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

__all__ = ["JSON_SAFE_MAX_BYTES", "to_json_safe"]

JSON_SAFE_MAX_BYTES = 256 * 1024
"""The default bound on the encoded size of what :func:`to_json_safe` returns."""

_MAX_INT = 2**63
_BYTES_PREVIEW = 96


class _Limits:
    __slots__ = ("max_depth", "max_items", "max_string")

    def __init__(self, max_depth: int, max_items: int, max_string: int) -> None:
        self.max_depth = max_depth
        self.max_items = max_items
        self.max_string = max_string


def to_json_safe(
    value: Any,
    *,
    max_bytes: int = JSON_SAFE_MAX_BYTES,
    max_depth: int = 20,
    max_items: int = 200,
    max_string: int = 4000,
) -> Any:
    """``value`` as plain JSON data, bounded; never raises.

    - ``str``/``int``/``bool``/``None`` pass through (strings cut at
      ``max_string`` characters with a ``…[+N chars]`` marker, lone surrogates
      and NUL characters replaced; integers beyond 64 bits become strings);
    - floats: NaN and infinities become ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
    - ``bytes``: ``{"type": "bytes", "length": n, "base64": <first 96 bytes>}``;
    - datetimes, dates and times: ISO 8601; ``timedelta``: seconds; ``Decimal``,
      ``UUID`` and paths: text; enums: their value;
    - mappings (keys as text), lists, tuples, sets (sorted when possible):
      at most ``max_items`` entries, then a ``"…[+N items]"`` marker;
    - pydantic models, dataclasses and objects with ``__dict__``: their fields;
      exceptions: ``{"type", "message"}``; anything else: its ``repr``;
    - a container met again inside itself: ``"<cycle: Type>"``; nesting deeper
      than ``max_depth``: ``"<max depth: Type>"``.

    When the result would encode to more than ``max_bytes`` bytes, it is
    converted again with tighter limits, and in the end replaced by
    ``{"truncated": true, "type": ..., "preview": ...}``.
    """
    try:
        limits = _Limits(max(1, max_depth), max(1, max_items), max(16, max_string))
        for _ in range(6):
            converted = _convert(value, limits, 0, set())
            size = _encoded_size(converted)
            if size is not None and size <= max_bytes:
                return converted
            limits = _Limits(
                max(1, limits.max_depth - 4),
                max(1, limits.max_items // 4),
                max(16, limits.max_string // 4),
            )
        return _truncated(value, max_bytes)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        return {"type": "unconvertible", "error": _cut(type(exc).__name__, 200)}


def _encoded_size(value: Any) -> int | None:
    try:
        return len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
    except (ValueError, TypeError, RecursionError):
        return None


def _truncated(value: Any, max_bytes: int) -> Any:
    preview_chars = max(0, min(2000, max_bytes // 8 - 80))
    summary = {"truncated": True, "type": _type_name(value), "preview": ""}
    if preview_chars:
        summary["preview"] = _cut(_safe_repr(value), preview_chars)
    if (_encoded_size(summary) or max_bytes + 1) <= max_bytes:
        return summary
    return None


def _type_name(value: Any) -> str:
    try:
        return _clean(type(value).__qualname__)[:200]
    except Exception:
        return "object"


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__
        return f"<unrepresentable {_type_name(value)}>"
    return _clean(str.__str__(text))


def _clean(text: str) -> str:
    """Text that encodes as UTF-8 and that Postgres' JSONB accepts (no NUL)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[+{len(text) - limit} chars]"


def _string(text: str, limits: _Limits) -> str:
    return _cut(_clean(str.__str__(text)), limits.max_string)


def _float(number: float) -> float | str:
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def _convert(value: Any, limits: _Limits, depth: int, seen: set[int]) -> Any:
    try:
        return _convert_unsafe(value, limits, depth, seen)
    except RecursionError:
        return f"<max depth: {_type_name(value)}>"
    except Exception as exc:
        return f"<unconvertible {_type_name(value)}: {_cut(type(exc).__name__, 100)}>"


def _convert_unsafe(value: Any, limits: _Limits, depth: int, seen: set[int]) -> Any:
    # Exact types first: the common case is cheap.
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is str:
        return _string(value, limits)
    if kind is int:
        return value if -_MAX_INT < value < _MAX_INT else _big_int(value)
    if kind is float:
        return _float(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, enum.Enum):
        return _convert(value.value, limits, depth + 1, seen)
    if isinstance(value, str):
        return _string(value, limits)
    if isinstance(value, int):
        number = int(value)
        return number if -_MAX_INT < number < _MAX_INT else _big_int(number)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, bytes | bytearray):
        return _bytes(bytes(value[:_BYTES_PREVIEW]), len(value))
    if isinstance(value, memoryview):
        return _bytes(value.tobytes()[:_BYTES_PREVIEW], value.nbytes)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _float(value.total_seconds())
    if isinstance(value, Decimal):
        if value.is_nan():
            return "NaN"
        if value.is_infinite():
            return "Infinity" if value > 0 else "-Infinity"
        return _cut(str(value), limits.max_string)
    if isinstance(value, uuid.UUID | PurePath):
        return _string(str(value), limits)
    if isinstance(value, complex):
        return {"real": _float(value.real), "imag": _float(value.imag)}
    if depth >= limits.max_depth:
        return f"<max depth: {_type_name(value)}>"
    marker = id(value)
    if marker in seen:
        return f"<cycle: {_type_name(value)}>"
    seen.add(marker)
    try:
        return _container(value, limits, depth, seen)
    finally:
        seen.discard(marker)


def _bytes(head: bytes, length: int) -> dict[str, Any]:
    return {"type": "bytes", "length": length, "base64": base64.b64encode(head).decode("ascii")}


def _big_int(number: int) -> str:
    sign = "-" if number < 0 else ""
    magnitude = abs(number)
    digits = magnitude.bit_length() * 30103 // 100000 + 1
    if digits > 4000:
        return f"{sign}<integer of about {digits} digits>"
    return f"{sign}{magnitude}"


def _container(value: Any, limits: _Limits, depth: int, seen: set[int]) -> Any:
    if isinstance(value, BaseException):
        return {
            "type": _type_name(value),
            "message": _cut(_clean(_exception_text(value)), limits.max_string),
        }
    if isinstance(value, BaseModel):
        try:
            fields = value.model_dump(mode="python", round_trip=False)
        except Exception:
            fields = {name: getattr(value, name, None) for name in type(value).model_fields}
        return _mapping(fields, limits, depth, seen)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _mapping(
            {field.name: getattr(value, field.name, None) for field in dataclasses.fields(value)},
            limits,
            depth,
            seen,
        )
    if isinstance(value, Mapping):
        return _mapping(value, limits, depth, seen)
    if isinstance(value, list | tuple):
        return _sequence(value, limits, depth, seen)
    if isinstance(value, Set):
        items = list(_bounded(value, limits.max_items + 1))
        with contextlib.suppress(Exception):  # unorderable members keep their order
            items.sort(key=_sort_key)
        return _sequence(items, limits, depth, seen, total=_length(value))
    if isinstance(value, type):
        return _string(f"<class {value.__module__}.{value.__qualname__}>", limits)
    attributes = _attributes(value)
    if attributes is not None:
        return {"type": _type_name(value), **_mapping(attributes, limits, depth, seen)}
    return _cut(_safe_repr(value), limits.max_string)


def _exception_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return _safe_repr(exc)


def _sort_key(item: Any) -> tuple[str, str]:
    return (_type_name(item), _safe_repr(item))


def _length(value: Any) -> int | None:
    try:
        return len(value)
    except Exception:
        return None


def _bounded(iterable: Any, limit: int) -> list[Any]:
    items: list[Any] = []
    for item in iterable:
        if len(items) >= limit:
            break
        items.append(item)
    return items


def _attributes(value: Any) -> dict[str, Any] | None:
    try:
        attributes = vars(value)
    except TypeError:
        return None
    if not isinstance(attributes, dict):
        return None
    return {key: item for key, item in attributes.items() if not str(key).startswith("_")}


def _mapping(value: Any, limits: _Limits, depth: int, seen: set[int]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    total = _length(value)
    count = 0
    for key, item in _bounded(value.items(), limits.max_items + 1):
        if count >= limits.max_items:
            break
        count += 1
        name = key if type(key) is str else _key_text(key, limits)
        name = _cut(_clean(name), min(limits.max_string, 200))
        if name in result:
            name = f"{name}#{count}"
        result[name] = _convert(item, limits, depth + 1, seen)
    if total is not None and total > count:
        result["…"] = f"[+{total - count} items]"
    return result


def _key_text(key: Any, limits: _Limits) -> str:
    converted = _convert(key, limits, limits.max_depth, set())
    if isinstance(converted, str):
        return converted
    try:
        return json.dumps(converted, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return _safe_repr(key)


def _sequence(
    value: Any, limits: _Limits, depth: int, seen: set[int], *, total: int | None = None
) -> list[Any]:
    items = _bounded(value, limits.max_items + 1)
    result = [_convert(item, limits, depth + 1, seen) for item in items[: limits.max_items]]
    known = total if total is not None else _length(value)
    if known is not None and known > len(result):
        result.append(f"…[+{known - len(result)} items]")
    return result
