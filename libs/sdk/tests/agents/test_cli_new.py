"""`disco new tool|worker|planner NAME` scaffolds an agent whose own tests pass."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from disco._cli.main import app

KINDS = ("tool", "worker", "planner")


@dataclass
class Scaffolded:
    created: Result
    folder: Path
    run: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scaffolded]:
    """One agent of each kind scaffolded, and each one's own tests run (side by side)."""
    root = tmp_path_factory.mktemp("scaffolds")
    created = {
        kind: CliRunner().invoke(app, ["new", kind, f"word-{kind}", "--dir", str(root)])
        for kind in KINDS
    }
    runs = {
        kind: subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
            cwd=root / f"word-{kind}",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in KINDS
    }
    results: dict[str, Scaffolded] = {}
    for kind, process in runs.items():
        stdout, stderr = process.communicate(timeout=120)
        run = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        results[kind] = Scaffolded(created[kind], root / f"word-{kind}", run)
    return results


@pytest.mark.parametrize("kind", KINDS)
def test_a_scaffolded_agent_passes_its_own_tests(
    kind: str, scaffolded: dict[str, Scaffolded]
) -> None:
    agent = scaffolded[kind]

    assert agent.created.exit_code == 0, agent.created.output
    assert sorted(p.name for p in agent.folder.iterdir() if p.is_file()) == sorted(
        ["pyproject.toml", "README.md", f"word_{kind}.py", f"test_word_{kind}.py"]
    )
    assert agent.run.returncode == 0, agent.run.stdout + agent.run.stderr
    assert "2 passed" in agent.run.stdout
    assert "warning" not in agent.run.stdout.lower()
    # How to try it: a `disco ask` of the request it takes, its data valid JSON.
    (try_it,) = [line for line in (agent.folder / "README.md").read_text().splitlines()
                 if line.startswith("- Try it:")]  # fmt: skip
    command = try_it.split("`")[1]
    assert command.startswith(f"disco ask word-{kind}.")
    json.loads(command.split("'")[1])


def test_a_bad_name_is_refused_with_an_example_of_a_good_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["new", "tool", "Bad Name", "--dir", str(tmp_path)])

    assert result.exit_code == 2
    assert "word-counter" in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()

    result = CliRunner().invoke(app, ["new", "worker", "taken", "--dir", str(tmp_path)])

    assert result.exit_code == 2
    assert "exists already" in result.output
