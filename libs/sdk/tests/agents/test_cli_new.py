"""`disco new tool|worker|planner NAME` scaffolds an agent whose own tests pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from disco._cli.main import app


@pytest.mark.parametrize("kind", ["tool", "worker", "planner"])
def test_a_scaffolded_agent_passes_its_own_tests(kind: str, tmp_path: Path) -> None:
    created = CliRunner().invoke(app, ["new", kind, f"word-{kind}", "--dir", str(tmp_path)])
    folder = tmp_path / f"word-{kind}"

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert created.exit_code == 0, created.output
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == sorted(
        ["pyproject.toml", "README.md", f"word_{kind}.py", f"test_word_{kind}.py"]
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


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
