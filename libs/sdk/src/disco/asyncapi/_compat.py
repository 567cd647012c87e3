"""Whether a payload schema change breaks the agents built against the old schema.

A message has **senders** and **receivers**, both written against a saved
document. The rule:

- a change that makes the new schema *refuse* a payload the old one accepted
  breaks **senders** (their payloads are refused, or dead-lettered): a field now
  required (new or not), a type or enum narrowed, a bound tightened, a pattern
  added, extra fields closed (``additionalProperties: false``);
- a change that lets the new schema *accept* a payload the old one refused, in a
  field the old schema described, breaks **receivers** (their code meets a value
  it was not written for): a required field made optional or removed, a type or
  enum widened, a bound loosened, a pattern or format dropped, extra fields
  opened where they were closed;
- a new optional field is compatible (receivers ignore fields they do not know,
  as disco's own readers do), unless the old schema closed its object; so is the
  removal of an optional field from an object that stays open, and any change of
  annotations (titles, descriptions, examples, defaults).

Combinators are compared branch by branch when both sides have the same number
(``anyOf: [X, null]`` as pydantic writes optional fields); other changes in them
cannot be told apart here and count as breaking both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RECEIVERS", "SENDERS", "SchemaChange", "compare_schemas"]

SENDERS = "senders"
RECEIVERS = "receivers"
BOTH = "senders and receivers"

Resolver = Callable[[Any], Any]

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
# (keyword, "larger is stricter"): tightening breaks senders, loosening receivers.
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_MAX_DEPTH = 32


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two payload schemas.

    Attributes:
        path: the field it concerns (``kg``, ``to.city``, ``lines[]``; ``""`` the payload).
        message: what changed, for people.
        breaks: who it breaks (``senders``, ``receivers``, both), or ``""`` when compatible.
    """

    path: str
    message: str
    breaks: str = ""

    @property
    def breaking(self) -> bool:
        """Whether agents built against the old schema break."""
        return bool(self.breaks)


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    kinds = schema.get("type")
    if isinstance(kinds, str):
        return {kinds}
    if isinstance(kinds, list):
        return {str(kind) for kind in kinds}
    return None


def _accepts(types: set[str], kind: str) -> bool:
    return kind in types or (kind == "integer" and "number" in types)


def _words(types: set[str]) -> str:
    return " | ".join(sorted(types, key=lambda t: _TYPES.index(t) if t in _TYPES else 99))


def _field(path: str) -> str:
    return f"`{path}`" if path else "the payload"


class _Comparison:
    def __init__(self, old: Resolver, new: Resolver) -> None:
        self._old = old
        self._new = new
        self.changes: list[SchemaChange] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, path: str, message: str, breaks: str = "") -> None:
        self.changes.append(SchemaChange(path=path, message=message, breaks=breaks))

    def compare(self, old: Any, new: Any, path: str, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            return
        old_ref, new_ref = _ref(old), _ref(new)
        if old_ref is not None and new_ref is not None:
            if (old_ref, new_ref) in self._seen:
                return  # a recursive model compared already
            self._seen.add((old_ref, new_ref))
        old, new = _mapping(self._old(old)), _mapping(self._new(new))
        if old is None or new is None:
            return
        if not old and new:
            self.add(path, f"{_field(path)} now has a schema (it took any value)", SENDERS)
            return
        if old and not new:
            self.add(path, f"{_field(path)} now takes any value", RECEIVERS)
            return
        old, old_null = _split_null(old, self._old)
        new, new_null = _split_null(new, self._new)
        self._types(old, new, path, old_null, new_null)
        self._values(old, new, path)
        self._bounds(old, new, path)
        self._strings(old, new, path)
        self._objects(old, new, path, depth)
        self._arrays(old, new, path, depth)
        self._combinators(old, new, path, depth)

    def _types(
        self,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        path: str,
        old_null: bool,
        new_null: bool,
    ) -> None:
        before, after = _types(old), _types(new)
        if before is not None and old_null:
            before.add("null")
        if after is not None and new_null:
            after.add("null")
        if before is None and after is None:
            if old_null and not new_null:
                self.add(path, f"{_field(path)} no longer takes null", SENDERS)
            elif new_null and not old_null:
                self.add(path, f"{_field(path)} may now be null", RECEIVERS)
            return
        if before is None or after is None:
            if after is not None:
                self.add(path, f"{_field(path)} must now be {_words(after)}", SENDERS)
            elif before is not None:
                self.add(
                    path, f"{_field(path)} is no longer restricted to {_words(before)}", RECEIVERS
                )
            return
        lost = {kind for kind in before if not _accepts(after, kind)}
        gained = {kind for kind in after if not _accepts(before, kind)}
        if lost and gained:
            self.add(path, f"{_field(path)} type {_words(before)} → {_words(after)}", BOTH)
        elif lost:
            self.add(path, f"{_field(path)} no longer takes {_words(lost)}", SENDERS)
        elif gained:
            self.add(path, f"{_field(path)} may now be {_words(gained)}", RECEIVERS)

    def _values(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before = _allowed(old)
        after = _allowed(new)
        if before is None and after is None:
            return
        if before is None and after is not None:
            self.add(path, f"{_field(path)} now takes only {_list(after)}", SENDERS)
        elif after is None and before is not None:
            self.add(path, f"{_field(path)} is no longer limited to {_list(before)}", RECEIVERS)
        elif before is not None and after is not None:
            removed = [v for v in before if v not in after]
            added = [v for v in after if v not in before]
            if removed:
                self.add(path, f"{_field(path)} no longer takes {_list(removed)}", SENDERS)
            if added:
                self.add(path, f"{_field(path)} may now be {_list(added)}", RECEIVERS)

    def _bounds(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        for keyword, stricter_when_larger in [(k, True) for k in _LOWER_BOUNDS] + [
            (k, False) for k in _UPPER_BOUNDS
        ]:
            before, after = _number(old.get(keyword)), _number(new.get(keyword))
            if before == after:
                continue
            shown_before, shown_after = old.get(keyword), new.get(keyword)
            if before is None:
                self.add(path, f"{_field(path)} gained {keyword} {shown_after}", SENDERS)
            elif after is None:
                self.add(path, f"{_field(path)} lost {keyword} {shown_before}", RECEIVERS)
            else:
                tighter = (after > before) == stricter_when_larger
                self.add(
                    path,
                    f"{_field(path)} {keyword} {shown_before} → {shown_after}",
                    SENDERS if tighter else RECEIVERS,
                )
        if old.get("multipleOf") != new.get("multipleOf"):
            self.add(
                path,
                f"{_field(path)} multipleOf {old.get('multipleOf')} → {new.get('multipleOf')}",
                BOTH,
            )

    def _strings(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        before, after = old.get("pattern"), new.get("pattern")
        if before != after:
            if before is None:
                self.add(path, f"{_field(path)} must now match {after}", SENDERS)
            elif after is None:
                self.add(path, f"{_field(path)} need no longer match {before}", RECEIVERS)
            else:
                self.add(path, f"{_field(path)} pattern {before} → {after}", BOTH)
        before, after = old.get("format"), new.get("format")
        if before != after:
            if before is None:
                self.add(path, f"{_field(path)} is now described as {after}")
            else:
                self.add(path, f"{_field(path)} format {before} → {after}", RECEIVERS)
        if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
            if new.get("uniqueItems"):
                self.add(path, f"{_field(path)} items must now be unique", SENDERS)
            else:
                self.add(path, f"{_field(path)} items may now repeat", RECEIVERS)

    def _objects(
        self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, depth: int
    ) -> None:
        before = old.get("properties") or {}
        after = new.get("properties") or {}
        was_required = set(old.get("required") or [])
        is_required = set(new.get("required") or [])
        old_open = _open(old)
        new_open = _open(new)
        for name in after:
            if name in before:
                continue
            child = _child(path, name)
            if name in is_required:
                self.add(child, f"field `{name}` added, required", SENDERS)
            elif old_open is False:
                self.add(child, f"optional field `{name}` added to a closed object", RECEIVERS)
            else:
                self.add(child, f"optional field `{name}` added")
        for name in before:
            child = _child(path, name)
            if name not in after:
                if name in was_required:
                    self.add(child, f"required field `{name}` removed", RECEIVERS)
                if new_open is False:
                    self.add(child, f"field `{name}` removed and the object is closed", SENDERS)
                elif name not in was_required:
                    self.add(child, f"optional field `{name}` removed")
                continue
            self.compare(before[name], after[name], child, depth + 1)
        for name in sorted(is_required - was_required):
            if name in before or name not in after:
                self.add(_child(path, name), f"field `{name}` is now required", SENDERS)
        for name in sorted(was_required - is_required):
            if name in after:
                self.add(_child(path, name), f"field `{name}` is no longer required", RECEIVERS)
        if old_open is not False and new_open is False:
            self.add(path, f"{_field(path)} no longer takes fields it does not list", SENDERS)
        elif old_open is False and new_open is not False:
            self.add(path, f"{_field(path)} may now carry fields it does not list", RECEIVERS)
        extra_before, extra_after = old.get("additionalProperties"), new.get("additionalProperties")
        if isinstance(extra_before, Mapping) and isinstance(extra_after, Mapping):
            self.compare(extra_before, extra_after, f"{path}{{*}}", depth + 1)

    def _arrays(
        self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, depth: int
    ) -> None:
        before, after = old.get("items"), new.get("items")
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            self.compare(before, after, f"{path}[]", depth + 1)
        elif before != after and (before is not None or after is not None):
            self.add(f"{path}[]", f"{_field(path)} items changed in a way not analysed", BOTH)
        tuple_before, tuple_after = old.get("prefixItems"), new.get("prefixItems")
        if isinstance(tuple_before, list) and isinstance(tuple_after, list):
            if len(tuple_before) != len(tuple_after):
                self.add(
                    path, f"{_field(path)} tuple of {len(tuple_before)} → {len(tuple_after)}", BOTH
                )
            for index, (b, a) in enumerate(zip(tuple_before, tuple_after, strict=False)):
                self.compare(b, a, f"{path}[{index}]", depth + 1)
        elif tuple_before != tuple_after:
            self.add(path, f"{_field(path)} tuple items changed", BOTH)

    def _combinators(
        self, old: Mapping[str, Any], new: Mapping[str, Any], path: str, depth: int
    ) -> None:
        for keyword in ("anyOf", "oneOf", "allOf"):
            before, after = old.get(keyword), new.get(keyword)
            if before is None and after is None:
                continue
            if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
                for b, a in zip(before, after, strict=True):
                    self.compare(b, a, path, depth + 1)
                continue
            self.add(path, f"{_field(path)} {keyword} changed in a way not analysed", BOTH)


def _split_null(schema: Mapping[str, Any], resolve: Resolver) -> tuple[Mapping[str, Any], bool]:
    """``schema`` without an ``anyOf``/``oneOf`` of one type and null (how pydantic writes
    ``X | None``), and whether it takes null that way."""
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if not isinstance(branches, list) or len(branches) != 2:
            continue
        kinds = [_types(_mapping(resolve(branch)) or {}) for branch in branches]
        if {"null"} not in kinds:
            continue
        other = _mapping(resolve(branches[1 - kinds.index({"null"})]))
        if other is None:
            continue
        rest = {key: value for key, value in schema.items() if key != keyword}
        return {**rest, **other}, True
    return schema, False


def _ref(node: Any) -> str | None:
    if isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
        return str(node["$ref"])
    return None


def _mapping(node: Any) -> Mapping[str, Any] | None:
    if node is True:
        return {}
    if isinstance(node, Mapping):
        return node
    return None


def _allowed(schema: Mapping[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return list(values) if isinstance(values, list) else None


def _list(values: list[Any]) -> str:
    return ", ".join(repr(value) for value in values)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _open(schema: Mapping[str, Any]) -> bool | None:
    extra = schema.get("additionalProperties")
    if extra is False:
        return False
    if extra is None or extra is True:
        return True
    return None  # a schema for the extra fields: compared as one


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def compare_schemas(
    old: Any,
    new: Any,
    *,
    resolve_old: Resolver = lambda node: node,
    resolve_new: Resolver = lambda node: node,
) -> list[SchemaChange]:
    """Every difference between payload schemas ``old`` and ``new`` that agents can
    notice, each saying whom it breaks (see the module docstring).

    Args:
        resolve_old, resolve_new: follow a ``$ref`` in each schema's own document
            (:meth:`BusDocument.resolve`); the default follows none.
    """
    comparison = _Comparison(resolve_old, resolve_new)
    comparison.compare(old, new, "")
    return comparison.changes
