"""Plan conditions (CEL) and action templates: safe, typed, with errors that name the problem."""

from __future__ import annotations

import pytest

from disco.conditions import (
    ConditionError,
    TemplateError,
    check_condition,
    evaluate_condition,
    render_template,
)

VARIABLES = {
    "success": True,
    "result": {"count": 3, "items": ["a", "b"], "status": "ok"},
    "error": None,
    "goal_data": {"budget": 2, "topic": "cel"},
    "results": {"search": {"hits": [{"url": "u1"}, {"url": "u2"}]}},
    "state": {},
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("success && result.count > 0", True),
        ("!success", False),
        ("result.count > goal_data.budget", True),
        ("size(result.items) == 2 && result.items.all(x, x != '')", True),
        ("result.status == 'failed'", False),
        ("has(result.missing)", False),
        ("'search' in results", True),
    ],
)
def test_a_condition_is_evaluated_over_the_event_and_the_plan(
    expression: str, expected: bool
) -> None:
    assert evaluate_condition(expression, VARIABLES) is expected


def test_a_condition_that_fails_to_evaluate_is_false_not_an_error() -> None:
    assert evaluate_condition("result.missing > 1", VARIABLES) is False
    assert evaluate_condition("result.status + 1 == 2", VARIABLES) is False


def test_a_condition_that_is_not_boolean_is_false() -> None:
    assert evaluate_condition("result.count", VARIABLES) is False


def test_code_is_not_executed_only_cel_is_understood() -> None:
    with pytest.raises(ConditionError, match=r"unknown function\(s\) \['__import__', 'system'\]"):
        check_condition("__import__('os').system('true')")
    with pytest.raises(ConditionError, match="not valid CEL"):
        check_condition("import os; os.system('true')")
    assert evaluate_condition("__import__('os').system('true')", VARIABLES) is False


def test_an_unknown_variable_is_refused_when_checked() -> None:
    with pytest.raises(ConditionError, match=r"unknown variable\(s\) \['reslt'\]"):
        check_condition("reslt.count > 0")


def test_a_template_that_is_one_placeholder_keeps_the_value_type() -> None:
    rendered = render_template(
        {"n": "{result.count}", "first": "{results.search.hits.0.url}", "all": "{result.items}"},
        VARIABLES,
    )

    assert rendered == {"n": 3, "first": "u1", "all": ["a", "b"]}


def test_placeholders_inside_text_are_formatted() -> None:
    rendered = render_template(["about {goal_data.topic} ({result.count} found)"], VARIABLES)

    assert rendered == ["about cel (3 found)"]


def test_a_missing_template_path_names_the_keys_that_exist() -> None:
    with pytest.raises(
        TemplateError, match=r"goal_data has no 'topik'; it has \['budget', 'topic'\]"
    ):
        render_template({"q": "{goal_data.topik}"}, VARIABLES)


def test_an_index_past_the_end_of_a_list_is_a_clear_error() -> None:
    with pytest.raises(TemplateError, match="has 2 item"):
        render_template("{results.search.hits.5.url}", VARIABLES)
