"""`disco new tool|worker|planner NAME` scaffolds a project whose agent passes its own tests.

Here the running disco is this checkout's (installed editable), so the project
takes disco from it. tests/integration/packaging makes projects from the built
wheels outside the repository and runs their printed next steps with uv.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from disco._cli.main import app

KINDS = ("tool", "worker", "planner")
ROOT = Path(__file__).resolve().parents[4]


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
    written = [p for p in agent.folder.rglob("*") if "__pycache__" not in p.parts]
    assert sorted(str(p.relative_to(agent.folder)) for p in written) == sorted(
        [
            ".dockerignore",
            ".gitignore",
            "Dockerfile",
            "README.md",
            "k8s",
            "k8s/deployment.yaml",
            "k8s/kustomization.yaml",
            "pyproject.toml",
            f"test_word_{kind}.py",
            f"word_{kind}.py",
        ]
    )
    assert agent.run.returncode == 0, agent.run.stdout + agent.run.stderr
    assert "2 passed" in agent.run.stdout
    assert "warning" not in agent.run.stdout.lower()


@pytest.mark.parametrize("kind", KINDS)
def test_the_printed_next_steps_and_the_readme_ask_the_agent_the_same_way(
    kind: str, scaffolded: dict[str, Scaffolded]
) -> None:
    agent = scaffolded[kind]
    printed = agent.created.output.splitlines()
    steps = printed[printed.index("next steps:") + 1 :]

    assert steps[0] == f"  cd {agent.folder}"
    assert steps[1].split("#")[0].strip() == "uv run pytest"
    assert steps[2].split("#")[0].strip() == f"uv run python word_{kind}.py"
    (ask,) = [line.strip() for line in steps if line.strip().startswith("uv run disco ask")]
    readme = (agent.folder / "README.md").read_text()
    assert f"\n{ask}\n" in readme
    event, data = ask.removeprefix("uv run disco ask ").split(" ", 1)
    assert event.startswith(f"word-{kind}.")
    json.loads(data.strip("'"))


def test_a_project_made_from_a_checkout_takes_disco_from_it_editable(
    scaffolded: dict[str, Scaffolded],
) -> None:
    pyproject = tomllib.loads((scaffolded["tool"].folder / "pyproject.toml").read_text())

    assert pyproject["project"]["dependencies"] == ["disco-sdk", "disco-common"]
    assert pyproject["tool"]["uv"]["sources"] == {
        "disco-sdk": {"path": str(ROOT / "libs" / "sdk"), "editable": True},
        "disco-common": {"path": str(ROOT / "libs" / "common"), "editable": True},
    }
    text = (scaffolded["tool"].folder / "pyproject.toml").read_text()
    assert "never from a package index by name alone" in text
    assert "delete [tool.uv.sources]" in text
    # The image cannot see the checkout: the Dockerfile and the README say so.
    assert "a build here cannot see" in (scaffolded["tool"].folder / "Dockerfile").read_text()
    assert (
        "run `make dist` in the checkout" in (scaffolded["tool"].folder / "README.md").read_text()
    )


@pytest.mark.parametrize("kind", KINDS)
def test_the_kubernetes_snippet_names_the_agent_its_image_and_its_consumer_group(
    kind: str, scaffolded: dict[str, Scaffolded]
) -> None:
    k8s = scaffolded[kind].folder / "k8s"
    deployment, hpa = yaml.safe_load_all((k8s / "deployment.yaml").read_text())

    assert yaml.safe_load((k8s / "kustomization.yaml").read_text())["resources"] == [
        "deployment.yaml"
    ]
    assert deployment["metadata"]["name"] == f"word-{kind}"
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"word-{kind}"
    assert hpa["spec"]["scaleTargetRef"]["name"] == f"word-{kind}"
    metric = hpa["spec"]["metrics"][0]["external"]["metric"]
    assert metric["selector"]["matchLabels"] == {"group": f"word-{kind}"}
    dockerfile = (scaffolded[kind].folder / "Dockerfile").read_text()
    assert f'CMD ["python", "word_{kind}.py"]' in dockerfile
    assert "USER 10001:10001" in dockerfile


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
