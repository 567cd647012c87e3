"""Conditions and templates of plan state machines: safe, declarative, no code executed.

**Conditions** (``StateTransition.condition``) are `CEL
<https://cel.dev>`_ expressions: the Common Expression Language of
Kubernetes, Envoy and Firebase rules. CEL is not Turing-complete (no loops, no
I/O, no assignment), every evaluation ends, and the same expression means the
same thing in Go, Java, JavaScript or Python, so a plan stored by one agent can
be read by any other. Expressions are compiled once and cached.

The variables a condition sees::

    success   bool    whether the triggering answer succeeded (true for other events)
    result    any     the answer's result (ActionResultData.result), else the event data
    error     map     the answer's error ({type, message, details}) or null
    data      any     the triggering event's data, as it came
    event     map     {type, id, correlation_id, source, topic}
    goal_data map     the goal's data
    results   map     results gathered so far, by state name
    state     map     the planner's own state (PlanContext.state)
    plan      map     {plan_id, current_state, status, session_id, parent_plan_id}

Examples: ``success && result.count > 0``, ``!success``,
``result.amount > goal_data.budget``, ``has(result.items) && size(result.items) == 0``.
A condition that fails to evaluate (a missing key, a type mismatch) is false.

**Templates** (``StateAction.data``) fill ``{path}`` placeholders from the same
variables: ``{goal_data.topic}``, ``{results.search.hits.0.url}``. A string that
is exactly one placeholder takes the value as it is (a number stays a number);
placeholders inside longer strings are formatted as text. A missing path is an
error that names the path and the keys that do exist.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = [
    "CONDITION_VARIABLES",
    "ConditionError",
    "TemplateError",
    "check_condition",
    "evaluate_condition",
    "render_template",
]

CONDITION_VARIABLES = frozenset(
    {"success", "result", "error", "data", "event", "goal_data", "results", "state", "plan"}
)
"""The names a condition may use."""

_CEL_FUNCTIONS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double",
        "string", "bytes", "bool", "type", "dyn", "duration", "timestamp", "has", "all",
        "exists", "exists_one", "map", "filter", "max", "min", "getFullYear", "getMonth",
        "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getHours", "getMinutes",
        "getSeconds", "getMilliseconds", "lowerAscii", "upperAscii", "trim", "split", "join",
        "replace", "indexOf", "lastIndexOf", "substring", "charAt",
    }
)  # fmt: skip
"""CEL's standard functions and macros (what a condition may call)."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*)\}")


class ConditionError(ValueError):
    """A condition is not a valid CEL expression over the known variables."""


class TemplateError(ValueError):
    """A template placeholder names a path the plan does not have."""


@lru_cache(maxsize=4096)
def _compiled(expression: str) -> Any:
    # Imported on first use: the cel package also loads its interactive CLI
    # (prompt_toolkit, rich), which `import disco` should not pay for.
    import cel

    try:
        return cel.compile(expression)
    except (ValueError, RuntimeError) as exc:
        raise ConditionError(f"condition {expression!r} is not valid CEL: {exc}") from None


def check_condition(expression: str) -> None:
    """Raise :class:`ConditionError` unless ``expression`` compiles and uses known variables.

    Called when a plan is built, so a typo fails before the plan runs.
    """
    program = _compiled(expression)
    functions = sorted(
        name
        for name in program.functions()
        # Operators (`_&&_`, `_[_]`, `!_`, `@in`...) contain a non-identifier character.
        if name.replace("_", "a").isalnum() and name not in _CEL_FUNCTIONS
    )
    if functions:
        raise ConditionError(
            f"condition {expression!r} calls unknown function(s) {functions}; CEL's standard "
            f"functions are {sorted(_CEL_FUNCTIONS)}"
        )
    unknown = sorted(set(program.variables()) - CONDITION_VARIABLES)
    if unknown:
        raise ConditionError(
            f"condition {expression!r} uses unknown variable(s) {unknown}; a condition may "
            f"use {sorted(CONDITION_VARIABLES)}"
        )


def evaluate_condition(expression: str, variables: Mapping[str, Any]) -> bool:
    """Whether ``expression`` holds over ``variables``.

    An expression that does not evaluate to a boolean, or fails while evaluating
    (a missing key, a type mismatch, a division by zero), counts as false: a
    transition applies only when its condition is clearly true.

    Raises:
        ConditionError: the expression does not compile.
    """
    program = _compiled(expression)
    try:
        value = program.execute(_cel_safe(dict(variables)))
    except Exception:
        return False
    return value is True


def _cel_safe(value: Any) -> Any:
    # CEL maps need string keys and know no tuples or sets; JSON already fits.
    if isinstance(value, Mapping):
        return {str(key): _cel_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_cel_safe(item) for item in value]
    return value


def render_template(template: Any, variables: Mapping[str, Any]) -> Any:
    """``template`` with every ``{path}`` placeholder filled from ``variables``.

    Dicts and lists are rendered item by item; other values are returned as they
    are.

    Raises:
        TemplateError: a placeholder names a path that does not exist.
    """
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole is not None:
            return _lookup(whole.group(1), variables)
        return _PLACEHOLDER.sub(lambda m: _as_text(_lookup(m.group(1), variables)), template)
    if isinstance(template, Mapping):
        return {key: render_template(item, variables) for key, item in template.items()}
    if isinstance(template, list):
        return [render_template(item, variables) for item in template]
    return template


def _lookup(path: str, variables: Mapping[str, Any]) -> Any:
    current: Any = variables
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(current, Mapping):
            if part not in current:
                known = sorted(str(key) for key in current)
                where = ".".join(walked) or "the template variables"
                raise TemplateError(
                    f"placeholder {{{path}}}: {where} has no {part!r}; it has {known}"
                )
            current = current[part]
        elif isinstance(current, list) and part.isdigit():
            index = int(part)
            if index >= len(current):
                raise TemplateError(
                    f"placeholder {{{path}}}: {'.'.join(walked)} has {len(current)} item(s), "
                    f"no index {index}"
                )
            current = current[index]
        else:
            raise TemplateError(
                f"placeholder {{{path}}}: {'.'.join(walked) or path} is "
                f"{type(current).__name__}, not a map or list"
            )
        walked.append(part)
    return current


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)
