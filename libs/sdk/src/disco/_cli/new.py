"""``disco new tool|worker|planner NAME``: scaffold a runnable agent with a passing test."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["Kind", "new", "scaffold"]

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


class Kind(StrEnum):
    """What to scaffold."""

    TOOL = "tool"
    WORKER = "worker"
    PLANNER = "planner"


_PYPROJECT = """[project]
name = "{name}"
version = "0.1.0"
description = "A disco {kind}."
requires-python = ">=3.11"
dependencies = ["disco-sdk"]

[tool.pytest.ini_options]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
pythonpath = ["."]
"""

_README = """# {name}

A disco {kind}, made with `disco new {kind} {name}`.

- Run it against the local stack (`disco dev up` in another terminal):
  `python {module}.py`
- Test it without a broker (disco.testing): `pytest`
- Try it: {try_it}
"""

_TOOL = '''"""{name}: a disco Tool. The handler's return value is the answer to the caller.

Run it with `python {module}.py` against a running stack (`disco dev up`).
"""

from __future__ import annotations

from pydantic import BaseModel

from disco import Tool


class {cls}Request(BaseModel):
    """What callers send (registered as the request schema)."""

    text: str


class {cls}Result(BaseModel):
    """What the tool answers (registered as the response schema)."""

    text: str
    words: int


tool = Tool("{name}", description="Counts the words of a text.")


@tool.on_invoke("{name}.requested")
async def count_words(request: {cls}Request) -> {cls}Result:
    """Counts the words of a text."""
    return {cls}Result(text=request.text, words=len(request.text.split()))


if __name__ == "__main__":
    tool.serve()
'''

_TOOL_TEST = '''"""Unit tests of {name}: no broker, no services (disco.testing)."""

from __future__ import annotations

from disco.testing import AgentTestKit
from {module} import tool


async def test_it_counts_the_words() -> None:
    async with AgentTestKit(tool) as kit:
        request = await kit.request(
            "{name}.requested", {{"text": "one two three"}}, response_event="{name}.done"
        )

    assert kit.result_of(request).result == {{"text": "one two three", "words": 3}}


async def test_a_request_without_text_is_answered_with_an_error() -> None:
    async with AgentTestKit(tool) as kit:
        request = await kit.request("{name}.requested", {{}}, response_event="{name}.done")

    result = kit.result_of(request)
    assert result.success is False
    assert result.error is not None
    assert result.error.type == "ValidationError"
'''

_WORKER = '''"""{name}: a disco Worker. It delegates and completes when the answer comes back.

Run it with `python {module}.py` against a running stack (`disco dev up`); it
asks a tool for `{name}.lookup.requested` — start one, or answer by hand.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from disco import ResultContext, TaskContext, Worker


class {cls}Request(BaseModel):
    """What callers send."""

    topic: str


worker = Worker("{name}", description="Looks a topic up and reports what it found.")


@worker.on_task("{name}.requested")
async def start(task: TaskContext[{cls}Request]) -> None:
    """Looks a topic up and reports what it found."""
    # The task is saved before the request goes out: any instance can finish it.
    await task.delegate(
        "{name}.lookup.requested",
        {{"query": task.input.topic}},
        response_event="{name}.lookup.done",
    )


@worker.on_result("{name}.lookup.done")
async def finish(result: ResultContext) -> None:
    task = await result.restore_task()
    if not result.success:
        await task.fail(result.error or "the lookup failed")
        return
    found: Any = result.result
    await task.complete({{"topic": task.input.topic, "found": found}})


if __name__ == "__main__":
    worker.serve()
'''

_WORKER_TEST = '''"""Unit tests of {name}: no broker, no services (disco.testing)."""

from __future__ import annotations

from disco.testing import AgentTestKit
from {module} import worker


async def test_it_reports_what_the_lookup_found() -> None:
    async with AgentTestKit(worker) as kit:
        request = await kit.request(
            "{name}.requested", {{"topic": "kafka"}}, response_event="done"
        )
        (lookup,) = kit.requests("{name}.lookup.requested")
        await kit.reply(lookup, ["a broker", "a log"])

    assert kit.result_of(request).result == {{"topic": "kafka", "found": ["a broker", "a log"]}}


async def test_a_failed_lookup_fails_the_task() -> None:
    async with AgentTestKit(worker) as kit:
        request = await kit.request(
            "{name}.requested", {{"topic": "kafka"}}, response_event="done"
        )
        (lookup,) = kit.requests("{name}.lookup.requested")
        await kit.reply(lookup, error="nothing indexed")

    result = kit.result_of(request)
    assert result.success is False
'''

_PLANNER = '''"""{name}: a disco Planner. Each goal runs as an event-driven state machine.

Run it with `python {module}.py` against a running stack (`disco dev up`).
"""

from __future__ import annotations

from disco import PlanDefinition, Planner, StateAction, StateConfig, StateTransition

PLAN = PlanDefinition(
    plan_type="{name}",
    description="Search; summarize what was found, or fail.",
    states=[
        StateConfig(state_name="start", default_next="searching"),
        StateConfig(
            state_name="searching",
            action=StateAction(
                event_type="{name}.search.requested",
                response_event="{name}.searched",
                data={{"query": "{{goal_data.topic}}"}},
            ),
            transitions=[
                StateTransition(
                    on_event="{name}.searched", to_state="failed", condition="!success"
                ),
                StateTransition(on_event="{name}.searched", to_state="summarizing"),
            ],
        ),
        StateConfig(
            state_name="summarizing",
            action=StateAction(
                event_type="{name}.summarize.requested",
                response_event="{name}.summarized",
                data={{"items": "{{results.searching}}"}},
            ),
            transitions=[StateTransition(on_event="{name}.summarized", to_state="done")],
        ),
        StateConfig(state_name="done", is_terminal=True),
        StateConfig(state_name="failed", is_terminal=True, is_failure=True),
    ],
)

planner = Planner("{name}", description="Searches a topic and summarizes it.")
planner.add_plan("{name}.goal", PLAN)


if __name__ == "__main__":
    planner.serve()
'''

_PLANNER_TEST = '''"""Unit tests of {name}: no broker, no services (disco.testing)."""

from __future__ import annotations

from disco.testing import AgentTestKit
from {module} import planner


async def test_a_goal_runs_search_then_summary() -> None:
    async with AgentTestKit(planner) as kit:
        goal = await kit.request("{name}.goal", {{"topic": "cel"}}, response_event="done")
        (search,) = kit.requests("{name}.search.requested")
        assert search.data == {{"query": "cel"}}
        await kit.reply(search, ["r1", "r2"])
        (summary,) = kit.requests("{name}.summarize.requested")
        assert summary.data == {{"items": ["r1", "r2"]}}
        await kit.reply(summary, "two results")

    assert kit.result_of(goal).result == {{"searching": ["r1", "r2"], "summarizing": "two results"}}


async def test_a_failed_search_fails_the_goal() -> None:
    async with AgentTestKit(planner) as kit:
        goal = await kit.request("{name}.goal", {{"topic": "cel"}}, response_event="done")
        (search,) = kit.requests("{name}.search.requested")
        await kit.reply(search, error="index down")

    assert kit.result_of(goal).success is False
'''

_TEMPLATES = {
    Kind.TOOL: (
        _TOOL,
        _TOOL_TEST,
        """`disco ask {name}.requested '{{"text": "one two three"}}'`""",
    ),
    Kind.WORKER: (
        _WORKER,
        _WORKER_TEST,
        """`disco ask {name}.requested '{{"topic": "kafka"}}'` (it delegates """
        "`{name}.lookup.requested`: `disco tail` shows it wait for an agent that answers it)",
    ),
    Kind.PLANNER: (
        _PLANNER,
        _PLANNER_TEST,
        """`disco ask {name}.goal '{{"topic": "kafka"}}'` (its states ask for """
        "`{name}.search.requested` and `{name}.summarize.requested`: `disco tail` shows them)",
    ),
}


def scaffold(kind: Kind, name: str, directory: Path) -> list[Path]:
    """Write a runnable ``kind`` agent called ``name`` into ``directory/name``.

    Returns:
        The files written.

    Raises:
        ValueError: ``name`` is not a valid agent name, or the folder exists.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a good agent name: use lower-case letters, digits and '-', "
            "starting with a letter (e.g. 'word-counter')"
        )
    target = directory / name
    if target.exists():
        raise ValueError(f"{target} exists already: choose another name or folder")
    module = name.replace("-", "_")
    cls = "".join(part.capitalize() for part in name.split("-"))
    source, test, try_it = _TEMPLATES[kind]
    values = {"name": name, "module": module, "cls": cls, "kind": kind.value}
    files = {
        target / "pyproject.toml": _PYPROJECT.format(**values),
        target / "README.md": _README.format(**values, try_it=try_it.format(**values)),
        target / f"{module}.py": source.format(**values),
        target / f"test_{module}.py": test.format(**values),
    }
    target.mkdir(parents=True)
    for path, text in files.items():
        path.write_text(text)
    return list(files)


def new(
    kind: Annotated[Kind, typer.Argument(help="What to make: tool, worker or planner.")],
    name: Annotated[str, typer.Argument(help="The agent's name, e.g. word-counter.")],
    directory: Annotated[
        Path, typer.Option("--dir", "-d", help="Where to create the agent's folder.")
    ] = Path("."),
) -> None:
    """Scaffold a runnable agent with a test (`disco new tool word-counter`)."""
    try:
        files = scaffold(kind, name, directory)
    except ValueError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    folder = files[0].parent
    typer.echo(f"created {folder}/")
    for path in files:
        typer.echo(f"  {path.name}")
    typer.echo(f"\nnext:  cd {folder} && pytest      (then: python {files[2].name})")
