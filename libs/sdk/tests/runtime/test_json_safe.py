"""``to_json_safe``: any value, however hostile, becomes bounded, valid JSON; it never raises."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from collections import OrderedDict, deque
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from disco.runtime import to_json_safe
from tests.fixtures.properties import examples

properties = settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])


def valid_json(value: Any) -> str:
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogates
    assert "\x00" not in text
    assert json.loads(text) == value
    return text


class Colour(enum.Enum):
    RED = "red"
    BLUE = 2


@dataclasses.dataclass
class Point:
    x: int
    label: str


class Model(BaseModel):
    name: str
    when: dt.datetime


class Slotted:
    __slots__ = ("a",)

    def __init__(self) -> None:
        self.a = 1


class Plain:
    def __init__(self) -> None:
        self.public = {1, 2}
        self._private = "hidden"


class HostileRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


class HostileStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no str either")


class HostileIteration(list[int]):
    def __iter__(self) -> Any:
        raise RuntimeError("cannot iterate")


class HostileMapping(dict[str, int]):
    def items(self) -> Any:
        raise RuntimeError("cannot list")


class HostileAttribute:
    @property
    def __dict__(self) -> Any:  # type: ignore[override]
        raise RuntimeError("no attributes")


class Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparisons")


def hostile_values() -> list[Any]:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    looped: dict[str, Any] = {"a": 1}
    looped["self"] = looped
    nested: Any = []
    for _ in range(10_000):
        nested = [nested]
    return [
        cycle,
        looped,
        nested,
        b"\x00\xff" * 1000,
        bytearray(b"abc"),
        memoryview(b"xyz"),
        dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        dt.date(2026, 1, 1),
        dt.time(12, 30),
        dt.timedelta(minutes=2),
        Decimal("1.10"),
        Decimal("NaN"),
        Decimal("-Infinity"),
        uuid.UUID(int=7),
        Colour.RED,
        Colour.BLUE,
        {3, 1, 2},
        frozenset({"a", 1}),
        ValueError("bad value"),
        HostileStr(),
        Point(1, "p"),
        Model(name="m", when=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
        Slotted(),
        Plain(),
        HostileRepr(),
        HostileIteration([1, 2]),
        HostileMapping(a=1),
        HostileAttribute(),
        Unhashable(),
        float("nan"),
        float("inf"),
        -math.inf,
        10**5000,
        -(2**70),
        "x" * 10_000_000,
        list(range(1_000_000)),
        {i: i for i in range(100_000)},
        "\ud800 lone surrogate and \x00 nul",
        {(1, 2): "tuple key", None: "none key", Colour.RED: "enum key"},
        PurePosixPath("/tmp/x"),
        deque([1, 2]),
        OrderedDict(a=1),
        complex(1, float("nan")),
        iter([1, 2]),
        (x for x in range(3)),
        object(),
        type,
        print,
        Ellipsis,
        NotImplemented,
    ]


def test_hostile_values_become_valid_bounded_json() -> None:
    for value in hostile_values():
        converted = to_json_safe(value, max_bytes=64 * 1024)
        text = valid_json(converted)
        assert len(text.encode()) <= 64 * 1024, type(value)


def test_everyday_values_convert_as_expected() -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)

    assert to_json_safe({"when": when, "n": Decimal("1.10"), "id": uuid.UUID(int=1)}) == {
        "when": "2026-01-02T03:04:05+00:00",
        "n": "1.10",
        "id": "00000000-0000-0000-0000-000000000001",
    }
    assert to_json_safe({3, 1, 2}) == [1, 2, 3]
    assert to_json_safe(Colour.RED) == "red"
    assert to_json_safe(ValueError("bad")) == {"type": "ValueError", "message": "bad"}
    assert to_json_safe(Point(1, "p")) == {"x": 1, "label": "p"}
    assert to_json_safe(b"abc") == {"type": "bytes", "length": 3, "base64": "YWJj"}
    assert to_json_safe([float("nan"), float("inf"), -math.inf]) == [
        "NaN",
        "Infinity",
        "-Infinity",
    ]
    assert to_json_safe(Plain()) == {"type": "Plain", "public": [1, 2]}


def test_cycles_are_marked_not_followed() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)

    assert to_json_safe(cycle) == [1, "<cycle: list>"]


def test_a_shared_value_that_is_not_a_cycle_is_kept_twice() -> None:
    shared = {"k": 1}

    assert to_json_safe([shared, shared]) == [{"k": 1}, {"k": 1}]


def test_long_strings_and_lists_are_cut_with_a_marker() -> None:
    converted = to_json_safe({"s": "y" * 5000, "l": list(range(500))}, max_string=100, max_items=10)

    assert converted["s"] == "y" * 100 + "…[+4900 chars]"
    assert converted["l"][-1] == "…[+490 items]"
    assert len(converted["l"]) == 11


def test_a_value_too_large_for_the_bound_is_summarized_within_it() -> None:
    converted = to_json_safe(["z" * 1000 for _ in range(1000)], max_bytes=2000)

    assert len(valid_json(converted).encode()) <= 2000


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary()
    | st.datetimes()
    | st.decimals()
    | st.uuids()
    | st.sampled_from(list(Colour)),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=5)
        | st.sets(st.integers() | st.text(), max_size=5)
        | st.tuples(inner, inner)
        | st.builds(Point, x=st.integers(), label=st.text())
        | st.builds(ValueError, st.text())
    ),
    max_leaves=30,
)


@properties
@given(json_like, st.integers(min_value=64, max_value=100_000))
def test_any_value_becomes_valid_json_within_its_bound(value: Any, max_bytes: int) -> None:
    converted = to_json_safe(value, max_bytes=max_bytes)

    text = valid_json(converted)
    assert len(text.encode()) <= max_bytes


@properties
@given(st.sampled_from(hostile_values()), st.integers(min_value=64, max_value=10_000))
def test_hostile_values_never_raise_whatever_the_bound(value: Any, max_bytes: int) -> None:
    converted = to_json_safe(value, max_bytes=max_bytes)

    assert len(valid_json(converted).encode()) <= max_bytes
