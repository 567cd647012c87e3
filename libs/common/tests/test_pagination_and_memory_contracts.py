"""Cursor encoding, and the memory service's request rules."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from disco_common.canonical import text_hash
from disco_common.memory import (
    ErasureResult,
    ErasureScope,
    PlanListQuery,
    ProcedureCreate,
    ProcedureUpdate,
    SemanticMemoryUpsert,
    SemanticQuery,
    WorkingMemoryEntry,
    WorkingMemoryPut,
)
from disco_common.pagination import CursorError, decode_cursor, encode_cursor
from disco_common.plans import PlanStatus


class _Position(BaseModel):
    after: datetime
    id: str


# -- cursors ----------------------------------------------------------------------


@given(
    st.dictionaries(
        st.text(max_size=10),
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        max_size=5,
    )
)
def test_any_small_position_round_trips_through_a_cursor(position: dict[str, object]) -> None:
    assert decode_cursor(encode_cursor(position)) == position


def test_a_cursor_is_url_safe_without_padding() -> None:
    cursor = encode_cursor({"after": "2026-01-01T00:00:00Z", "id": "???>>>"})

    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_a_cursor_decodes_into_a_typed_position() -> None:
    position = _Position(after=datetime(2026, 1, 1, tzinfo=UTC), id="a-1")

    assert decode_cursor(encode_cursor(position), _Position) == position


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not a cursor!",
        "%%%",
        base64.urlsafe_b64encode(b"not json").decode().rstrip("="),
        base64.urlsafe_b64encode(b"[1, 2]").decode().rstrip("="),
        base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("="),
        "A" * 1025,
    ],
    ids=["empty", "spaces", "percent", "not-json", "json-array", "not-utf8", "too-long"],
)
def test_a_malformed_cursor_raises_a_clear_cursor_error(cursor: str) -> None:
    with pytest.raises(CursorError, match="invalid cursor"):
        decode_cursor(cursor)


def test_a_cursor_of_another_list_is_rejected_by_the_position_model() -> None:
    foreign = encode_cursor({"offset": 10})

    with pytest.raises(CursorError, match="another list"):
        decode_cursor(foreign, _Position)


def test_a_cursor_error_is_a_value_error() -> None:
    assert issubclass(CursorError, ValueError)


def test_a_position_too_big_for_a_cursor_is_refused() -> None:
    with pytest.raises(CursorError, match="limit"):
        encode_cursor({"ids": ["x" * 100] * 20})


# -- working memory ---------------------------------------------------------------


def test_a_working_memory_entry_exposes_its_version_as_an_etag() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    entry = WorkingMemoryEntry(
        plan_id="p-1", key="k", value=1, version=7, created_at=now, updated_at=now
    )

    assert entry.etag == '"7"'
    assert entry.model_dump()["etag"] == '"7"'


def test_expected_version_zero_means_create_only_and_negative_is_rejected() -> None:
    assert WorkingMemoryPut(value=1, expected_version=0).expected_version == 0
    with pytest.raises(ValidationError, match="expected_version"):
        WorkingMemoryPut(value=1, expected_version=-1)


def test_a_zero_ttl_is_rejected() -> None:
    with pytest.raises(ValidationError, match="ttl_seconds"):
        WorkingMemoryPut(value=1, ttl_seconds=0)


# -- semantic memory --------------------------------------------------------------


def test_semantic_content_over_the_limit_is_rejected() -> None:
    with pytest.raises(ValidationError, match="content"):
        SemanticMemoryUpsert(content="x" * 32_001)


def test_empty_semantic_content_is_rejected() -> None:
    with pytest.raises(ValidationError, match="content"):
        SemanticMemoryUpsert(content="")


def test_a_metadata_filter_takes_scalar_equalities() -> None:
    query = SemanticQuery(text="france", filter={"source": "wiki", "year": 2024, "draft": False})

    assert query.filter == {"source": "wiki", "year": 2024, "draft": False}


@pytest.mark.parametrize(
    "metadata_filter",
    [
        {"source": {"$ne": "wiki"}},
        {"tags": ["a", "b"]},
        {"bad key'; drop": "x"},
        {f"k{i}": i for i in range(21)},
    ],
    ids=["operator-object", "list-value", "unsafe-key", "too-many-keys"],
)
def test_a_metadata_filter_outside_the_safe_shape_is_rejected(
    metadata_filter: dict[str, object],
) -> None:
    with pytest.raises(ValidationError, match="filter"):
        SemanticQuery.model_validate({"text": "x", "filter": metadata_filter})


def test_the_content_hash_of_equal_text_is_equal() -> None:
    assert text_hash("Paris") == text_hash("Paris") != text_hash("paris")


# -- procedural memory ------------------------------------------------------------


def test_a_procedure_needs_steps_or_instructions() -> None:
    with pytest.raises(ValidationError, match="steps or instructions"):
        ProcedureCreate(name="refund", trigger="charged twice")


def test_a_procedure_update_must_change_something() -> None:
    with pytest.raises(ValidationError, match="at least one field"):
        ProcedureUpdate(expected_version=3)


def test_a_procedure_update_only_sets_what_it_was_given() -> None:
    update = ProcedureUpdate(instructions="Refund the later charge.")

    assert update.model_dump(exclude_unset=True) == {"instructions": "Refund the later charge."}


# -- plans and erasure ------------------------------------------------------------


def test_a_plan_status_filter_rejects_an_unknown_status() -> None:
    assert PlanListQuery(status="paused").status is PlanStatus.PAUSED  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="status"):
        PlanListQuery(status="active")  # type: ignore[arg-type]


def test_an_erasure_result_totals_its_counts() -> None:
    result = ErasureResult(
        scope=ErasureScope.USER,
        tenant_id="acme",
        user_id="alice",
        deleted={"working_memory": 3, "semantic": 2, "episodic": 0},
    )

    assert result.total == 5
