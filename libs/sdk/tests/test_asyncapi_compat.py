"""Which payload schema changes break the agents built against the old schema (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from disco.asyncapi import RECEIVERS, SENDERS, BusDocument, SchemaChange, compare_schemas

BASE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "maxLength": 20},
        "qty": {"type": "integer", "minimum": 1},
        "colour": {"type": "string", "enum": ["red", "blue"]},
        "note": {"type": "string"},
    },
    "required": ["sku", "qty"],
}


def changed(**edits: Any) -> dict[str, Any]:
    """BASE with top-level keys replaced; ``properties`` entries merged (None removes)."""
    schema = {**BASE, "properties": dict(BASE["properties"])}
    for key, value in edits.items():
        if key == "properties":
            for name, prop in value.items():
                if prop is None:
                    schema["properties"].pop(name)
                else:
                    schema["properties"][name] = prop
        else:
            schema[key] = value
    return schema


def verdicts(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    return [(change.path, change.breaks) for change in compare_schemas(old, new)]


def test_an_unchanged_schema_and_changed_annotations_are_no_change() -> None:
    annotated = changed(
        title="Order line", description="One line", examples=[{"sku": "a", "qty": 1}]
    )
    annotated["properties"]["sku"] = {**BASE["properties"]["sku"], "description": "The SKU"}

    assert compare_schemas(BASE, BASE) == []
    assert compare_schemas(BASE, annotated) == []


def test_an_added_required_field_breaks_senders() -> None:
    new = changed(
        properties={"warehouse": {"type": "string"}}, required=["sku", "qty", "warehouse"]
    )

    (change,) = compare_schemas(BASE, new)

    assert (change.path, change.breaks) == ("warehouse", SENDERS)
    assert change.breaking
    assert "required" in change.message


def test_an_added_optional_field_is_compatible() -> None:
    (change,) = compare_schemas(BASE, changed(properties={"gift": {"type": "boolean"}}))

    assert (change.path, change.breaking) == ("gift", False)
    assert "optional field `gift` added" in change.message


def test_an_added_optional_field_breaks_receivers_of_a_closed_object() -> None:
    closed = changed(additionalProperties=False)
    new = changed(additionalProperties=False, properties={"gift": {"type": "boolean"}})

    assert verdicts(closed, new) == [("gift", RECEIVERS)]


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        ({"required": ["sku", "qty", "note"]}, [("note", SENDERS)]),  # optional -> required
        ({"required": ["sku"]}, [("qty", RECEIVERS)]),  # required -> optional
        ({"properties": {"qty": None}}, [("qty", RECEIVERS)]),  # a required field removed
        ({"properties": {"note": None}}, [("note", "")]),  # an optional one: compatible
    ],
    ids=["made-required", "made-optional", "required-removed", "optional-removed"],
)
def test_requiredness_and_removals(edits: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    new = changed(**edits)
    if "properties" in edits and "qty" in edits["properties"]:
        new["required"] = ["sku"]

    assert verdicts(BASE, new) == expected


def test_a_field_removed_from_a_closed_object_breaks_senders_that_still_send_it() -> None:
    new = changed(properties={"note": None}, additionalProperties=False)

    assert ("note", SENDERS) in verdicts(BASE, new)
    assert ("", SENDERS) in verdicts(BASE, new)  # and every field it does not list


@pytest.mark.parametrize(
    ("before", "after", "breaks"),
    [
        ({"type": "number"}, {"type": "integer"}, SENDERS),
        ({"type": "integer"}, {"type": "number"}, RECEIVERS),
        ({"type": "string"}, {"type": ["string", "null"]}, RECEIVERS),
        ({"type": ["string", "null"]}, {"type": "string"}, SENDERS),
        ({"type": "string"}, {"type": "integer"}, "senders and receivers"),
    ],
    ids=["narrowed", "widened", "nullable", "not-nullable", "replaced"],
)
def test_type_changes(before: dict[str, Any], after: dict[str, Any], breaks: str) -> None:
    assert verdicts(changed(properties={"x": before}), changed(properties={"x": after})) == [
        ("x", breaks)
    ]


def test_enum_narrowing_breaks_senders_and_widening_breaks_receivers() -> None:
    narrowed = changed(properties={"colour": {"type": "string", "enum": ["red"]}})
    widened = changed(properties={"colour": {"type": "string", "enum": ["red", "blue", "green"]}})
    constant = changed(properties={"colour": {"type": "string", "const": "red"}})

    assert verdicts(BASE, narrowed) == [("colour", SENDERS)]
    assert verdicts(BASE, widened) == [("colour", RECEIVERS)]
    assert verdicts(BASE, constant) == [("colour", SENDERS)]
    assert verdicts(narrowed, BASE) == [("colour", RECEIVERS)]


@pytest.mark.parametrize(
    ("prop", "after", "breaks"),
    [
        ("qty", {"type": "integer", "minimum": 5}, SENDERS),
        ("qty", {"type": "integer", "minimum": 0}, RECEIVERS),
        ("qty", {"type": "integer"}, RECEIVERS),
        ("sku", {"type": "string", "maxLength": 10}, SENDERS),
        ("sku", {"type": "string", "maxLength": 40}, RECEIVERS),
        ("sku", {"type": "string", "maxLength": 20, "pattern": "^[A-Z]+$"}, SENDERS),
        ("note", {"type": "string", "minLength": 1}, SENDERS),
    ],
    ids=[
        "min-raised",
        "min-lowered",
        "min-dropped",
        "max-lowered",
        "max-raised",
        "pattern",
        "min-length",
    ],
)
def test_bounds_tightened_break_senders_and_loosened_break_receivers(
    prop: str, after: dict[str, Any], breaks: str
) -> None:
    assert verdicts(BASE, changed(properties={prop: after})) == [(prop, breaks)]


def test_closing_and_opening_an_object() -> None:
    closed = changed(additionalProperties=False)

    assert verdicts(BASE, closed) == [("", SENDERS)]
    assert verdicts(closed, BASE) == [("", RECEIVERS)]


class Address(BaseModel):
    city: str
    zip: str | None = None


class Order(BaseModel):
    sku: str
    to: Address | None = None
    lines: list[Address] = []


class AddressV2(BaseModel):
    city: str
    zip: str | None = None
    country: str


class OrderV2(BaseModel):
    sku: str
    to: AddressV2 | None = None
    lines: list[AddressV2] = []


def test_nested_models_behind_references_are_compared_field_by_field() -> None:
    old, new = Order.model_json_schema(), OrderV2.model_json_schema()
    # As the registry's documents hold them: the $defs are where the references point.
    old_doc = BusDocument({"asyncapi": "3.0.0", **old})
    new_doc = BusDocument({"asyncapi": "3.0.0", **new})

    changes = compare_schemas(old, new, resolve_old=old_doc.resolve, resolve_new=new_doc.resolve)

    assert {(c.path, c.breaks) for c in changes} == {
        ("to.country", SENDERS),
        ("lines[].country", SENDERS),
    }


def test_a_field_made_nullable_the_pydantic_way_breaks_receivers_only() -> None:
    old = {"type": "object", "properties": {"zip": {"type": "string"}}}
    new = {
        "type": "object",
        "properties": {"zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
    }

    assert verdicts(old, new) == [("zip", RECEIVERS)]
    assert verdicts(new, old) == [("zip", SENDERS)]


class Node(BaseModel):
    name: str
    children: list[Node] = []


class NodeV2(BaseModel):
    name: str
    children: list[NodeV2] = []
    weight: float | None = None


def test_a_recursive_model_is_compared_without_looping() -> None:
    old, new = Node.model_json_schema(), NodeV2.model_json_schema()
    old_doc = BusDocument({"asyncapi": "3.0.0", **old})
    new_doc = BusDocument({"asyncapi": "3.0.0", **new})

    changes = compare_schemas(old, new, resolve_old=old_doc.resolve, resolve_new=new_doc.resolve)

    assert [(c.path, c.breaking) for c in changes] == [("weight", False)]


def test_a_schema_appearing_or_disappearing() -> None:
    assert verdicts({}, BASE) == [("", SENDERS)]
    assert verdicts(BASE, {}) == [("", RECEIVERS)]


def test_a_change_says_whom_it_breaks() -> None:
    assert SchemaChange("x", "m", SENDERS).breaking
    assert not SchemaChange("x", "m").breaking
