"""`disco new` makes a project whose printed next steps run as printed, anywhere.

Issue 33 part 3. Outside the repository: the `disco` of a virtualenv holding only
the built disco-sdk and disco-common wheels makes one project of each kind in a
folder outside any uv workspace; the steps it printed run verbatim in bash (`cd`,
`uv run pytest`), then each agent serves (`uv run python NAME.py`) against a real
stack on free ports and answers the printed `uv run disco ask` (a stand-in answers
what a worker or planner asks on its way). Inside this checkout: the checkout's
`disco` makes a project inside the checkout, and its printed steps pass there too.
Its Kubernetes snippet renders in disco's overlays and validates as deploy/k8s's do.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Stack
from tests.integration.packaging.conftest import ROOT, must, outside_env, run, uv_executable
from tests.integration.packaging.stand_ins import FOUND, SUMMARY

KINDS = ("tool", "worker", "planner")
ANSWERS = {
    "tool": {"text": "one two three", "words": 3},
    "worker": {"topic": "kafka", "found": FOUND},
    "planner": {"searching": FOUND, "summarizing": SUMMARY},
}


@dataclass
class Project:
    """A project `disco new` made, what it printed, and its first steps run."""

    folder: Path
    steps: list[str]
    """The printed next steps: cd, uv run pytest, uv run python NAME.py."""
    ask: str
    """The printed `uv run disco ask ...` for another terminal."""
    tested: subprocess.CompletedProcess[str] | None = None


def made(printed: str) -> Project:
    """The project a `disco new` run printed it made, with its printed steps."""
    lines = printed.splitlines()
    folder = Path(lines[0].removeprefix("created ").rstrip("/"))
    start = lines.index("next steps:") + 1
    steps = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        steps.append(line.strip())
    (ask,) = [line.strip() for line in lines if line.strip().startswith("uv run disco ask ")]
    return Project(folder, steps, ask)


def run_steps(projects: list[Project], cwd: Path) -> None:
    """Run each project's printed cd and `uv run pytest`, verbatim in bash, side by side."""
    running = [
        subprocess.Popen(
            ["bash", "-euc", "\n".join(project.steps[:2])],
            cwd=cwd,
            env=outside_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for project in projects
    ]
    for project, process in zip(projects, running, strict=True):
        out, err = process.communicate(timeout=600)
        project.tested = subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.fixture(scope="package")
def projects(sdk_venv: Path, outside: Path) -> dict[str, Project]:
    """One project of each kind made from the wheels outside the repository, tests run."""
    env = outside_env(path=sdk_venv)
    found = {
        kind: made(must(run(["disco", "new", kind, f"my-{kind}"], outside, env)).stdout)
        for kind in KINDS
    }
    run_steps(list(found.values()), outside)
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_a_project_made_outside_from_the_wheels_passes_its_printed_steps(
    kind: str, projects: dict[str, Project], outside: Path
) -> None:
    project = projects[kind]

    assert project.folder == Path(f"my-{kind}")
    assert project.steps[0] == f"cd my-{kind}"
    assert project.steps[1].startswith("uv run pytest ")
    assert project.tested is not None
    assert project.tested.returncode == 0, project.tested.stdout + project.tested.stderr
    assert "2 passed" in project.tested.stdout
    lock = (outside / project.folder / "uv.lock").read_text()
    assert 'source = { path = "wheels/disco_sdk-' in lock  # not an index
    assert 'source = { path = "wheels/disco_common-' in lock


@pytest.fixture
def stand_in(request: pytest.FixtureRequest, e2e_stack: Stack) -> Iterator[None]:
    """The agents a scaffolded worker or planner asks for, serving on the stack."""
    kind = request.node.callspec.params["kind"]
    if kind == "tool":
        yield
        return
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.packaging.stand_ins", kind, f"my-{kind}"],
        cwd=ROOT,
        env=e2e_stack.env,
        stdout=subprocess.DEVNULL,
        stderr=(e2e_stack.logs / f"stand-in-{kind}.log").open("wb"),
    )
    yield
    process.terminate()
    process.wait(30)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.usefixtures("stand_in")
def test_the_agent_serves_against_a_stack_and_answers_the_printed_request(
    kind: str, projects: dict[str, Project], outside: Path, e2e_stack: Stack
) -> None:
    project = projects[kind]
    folder = outside / project.folder
    stack = {key: value for key, value in e2e_stack.env.items() if key.startswith("DISCO_")}
    env = outside_env(stack)
    log = e2e_stack.logs / f"scaffolded-{kind}.log"
    serve = project.steps[2]
    assert serve.startswith(f"uv run python my_{kind}.py ")
    agent = subprocess.Popen(
        ["bash", "-c", serve],
        cwd=folder,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        asked = run(project.ask, folder, env, timeout=180)
    finally:
        os.killpg(agent.pid, signal.SIGTERM)
        stopped = agent.wait(30)

    assert asked.returncode == 0, asked.stdout + asked.stderr + log.read_text(errors="replace")
    answer = json.loads(asked.stdout)
    assert answer["success"] is True, answer
    assert answer["result"] == ANSWERS[kind]
    assert stopped == 0, log.read_text(errors="replace")  # SIGTERM: a clean stop


def test_a_project_made_inside_the_checkout_passes_its_printed_steps() -> None:
    # As a person in this checkout would: `uv run disco new tool NAME` from a folder
    # of the checkout (.disco/ is git-ignored state), then the printed steps.
    inside = ROOT / ".disco" / "scaffolds" / uuid.uuid4().hex[:8]
    inside.mkdir(parents=True)
    try:
        env = outside_env()
        created = must(run("uv run disco new tool in-checkout", inside, env))
        project = made(created.stdout)
        run_steps([project], inside)

        assert project.tested is not None
        assert project.tested.returncode == 0, project.tested.stdout + project.tested.stderr
        assert "2 passed" in project.tested.stdout
        pyproject = (inside / "in-checkout" / "pyproject.toml").read_text()
        sdk = os.path.relpath(ROOT / "libs" / "sdk", inside / "in-checkout")
        assert f'disco-sdk = {{ path = "{sdk}", editable = true }}' in pyproject
        assert sdk.startswith("../../")
    finally:
        shutil.rmtree(inside)


def _can_get_kubectl() -> bool:
    return shutil.which("kubectl") is not None or (
        shutil.which("apt-get") is not None and os.geteuid() == 0
    )


@pytest.mark.skipif(not _can_get_kubectl(), reason="no kubectl, and apt-get cannot install it")
def test_the_kubernetes_snippet_renders_in_disco_s_overlays_and_validates(
    projects: dict[str, Project], outside: Path, tmp_path: Path
) -> None:
    k8s = tmp_path / "k8s"
    shutil.copytree(ROOT / "deploy" / "k8s", k8s)
    snippet = outside / projects["worker"].folder / "k8s"
    for overlay in ("dev", "prod"):
        # What k8s/kustomization.yaml tells a person to add to an overlay.
        path = k8s / "overlays" / overlay / "kustomization.yaml"
        kustomization = yaml.safe_load(path.read_text())
        kustomization["resources"].append(os.path.relpath(snippet, path.parent))
        kustomization["images"].append(
            {"name": "my-worker", "newName": "registry.example.com/my-worker", "newTag": "0.1.0"}
        )
        path.write_text(yaml.safe_dump(kustomization, sort_keys=False))

    env = {**os.environ, "K8S_DIR": str(k8s), "UV": uv_executable()}
    checked = run(["bash", str(ROOT / "deploy" / "k8s" / "check.sh")], ROOT, env, timeout=600)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "k8s-check: dev:" in checked.stdout
    assert "k8s-check: prod:" in checked.stdout
    rendered = run(["kubectl", "kustomize", str(k8s / "overlays" / "prod")], ROOT, os.environ)
    documents = [doc for doc in yaml.safe_load_all(must(rendered).stdout) if doc]
    (deployment,) = [d for d in documents if d["kind"] == "Deployment" and
                     d["metadata"]["name"] == "my-worker"]  # fmt: skip
    assert deployment["metadata"]["namespace"] == "disco"
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/my-worker:0.1.0"
