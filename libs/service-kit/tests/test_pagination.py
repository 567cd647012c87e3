"""The pagination helper every list endpoint uses: cursors, pages, keyset SQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from disco_common.ids import UtcDatetime
from disco_common.pagination import CURSOR_MAX_CHARS, PageQuery, encode_cursor
from disco_service import InvalidCursor, Keyset, Paginator


class _StatusQuery(PageQuery):
    status: str | None = None


PLANS = Paginator("plans", tuple[UtcDatetime, str])
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROWS = [(T0.replace(minute=minute), f"plan-{minute}") for minute in (3, 2, 1)]


def _next_cursor(query: PageQuery, *, scope: str | None = None) -> str:
    page = PLANS.open(query, scope=scope).page(ROWS, key=lambda row: row)
    assert page.next_cursor is not None
    return page.next_cursor


def test_a_page_keeps_limit_items_and_its_cursor_resumes_after_the_last() -> None:
    request = PLANS.open(_StatusQuery(limit=2))

    page = request.page(ROWS, key=lambda row: row)
    resumed = PLANS.open(_StatusQuery(limit=2, cursor=page.next_cursor))

    assert request.after is None
    assert request.fetch == 3
    assert page.items == ROWS[:2]
    assert resumed.after == ROWS[1]


def test_the_last_page_has_no_cursor() -> None:
    page = PLANS.open(_StatusQuery(limit=3)).page(ROWS, key=lambda row: row)

    assert page.items == ROWS
    assert page.next_cursor is None


def test_rows_become_items_after_the_key_is_read_from_the_row() -> None:
    page = PLANS.open(_StatusQuery(limit=1)).page(
        ROWS, key=lambda row: row, item=lambda row: row[1]
    )

    assert page.items == ["plan-3"]
    assert PLANS.open(_StatusQuery(cursor=page.next_cursor)).after == ROWS[0]


def test_the_limit_may_change_between_pages_but_not_the_filters_or_the_scope() -> None:
    cursor = _next_cursor(_StatusQuery(limit=1, status="running"), scope="plan-a")

    assert PLANS.open(_StatusQuery(limit=50, status="running", cursor=cursor), scope="plan-a")
    with pytest.raises(InvalidCursor, match="other filters"):
        PLANS.open(_StatusQuery(limit=1, status="paused", cursor=cursor), scope="plan-a")
    with pytest.raises(InvalidCursor, match="other filters"):
        PLANS.open(_StatusQuery(limit=1, status="running", cursor=cursor), scope="plan-b")


def test_a_cursor_of_another_list_is_refused() -> None:
    sessions = Paginator("sessions", tuple[UtcDatetime, str])
    cursor = _next_cursor(_StatusQuery(limit=1))

    with pytest.raises(InvalidCursor, match="another list"):
        sessions.open(_StatusQuery(cursor=cursor))


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not a cursor!",
        "A" * (CURSOR_MAX_CHARS + 1),
        encode_cursor({"offset": 10}),
        encode_cursor({"of": "plans", "after": ["yesterday", "plan-1"], "scope": "x"}),
    ],
    ids=["empty", "not-base64url", "too-long", "foreign-shape", "altered"],
)
def test_anything_else_is_an_invalid_cursor_400(cursor: str) -> None:
    with pytest.raises(InvalidCursor) as refused:
        PLANS.open(_StatusQuery(cursor=cursor))

    assert (refused.value.status_code, refused.value.code) == (400, "invalid_cursor")
    assert "cursor" in refused.value.message


def test_a_key_that_does_not_fit_the_key_type_is_refused() -> None:
    fingerprint = PLANS.open(_StatusQuery()).fingerprint
    cursor = encode_cursor({"of": "plans", "after": ["not-a-date", "plan-1"], "scope": fingerprint})

    with pytest.raises(InvalidCursor, match="not one this service issued"):
        PLANS.open(_StatusQuery(cursor=cursor))


def test_a_keyset_seeks_past_the_key_in_its_direction() -> None:
    newest_first = Keyset("p.created_at", "p.plan_id", descending=True)
    by_key = Keyset("key")

    assert newest_first.order_by == "ORDER BY p.created_at DESC, p.plan_id DESC"
    assert newest_first.after(None) == ("TRUE", {})
    assert newest_first.after((T0, "plan-1")) == (
        "(p.created_at, p.plan_id) < (:keyset_0, :keyset_1)",
        {"keyset_0": T0, "keyset_1": "plan-1"},
    )
    assert by_key.after(("k",)) == ("(key) > (:keyset_0)", {"keyset_0": "k"})
    with pytest.raises(ValueError, match="2 sort columns"):
        newest_first.after(("only-one",))
