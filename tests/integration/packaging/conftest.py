"""disco as a team outside this repository gets it: built wheels, fresh virtualenvs.

- :func:`dist`: ``make dist`` into a temporary folder, once for the package (an
  sdist and a wheel of each of the seven packages).
- :func:`sdk_venv`: a virtualenv outside the workspace with only the disco-sdk
  and disco-common wheels (what an agent's developer installs).
- :func:`services_venv`: one with every wheel (what ``disco db upgrade`` needs).
- :func:`e2e_stack`: the e2e tests' stack (registry, memory, tracker processes
  on free ports), started once for this package.

Every command runs as a person's would: ``uv`` from PATH (the one the suite
runs under), with none of this workspace's environment (no VIRTUAL_ENV, no
PYTHONPATH), from folders outside the repository.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.e2e.conftest import e2e_stack  # noqa: F401 - the same stack, for this package
from tests.fixtures.tools import uv_executable

ROOT = Path(__file__).resolve().parents[3]
VERSION = (ROOT / "VERSION").read_text().strip()
PACKAGES = (
    "disco-common",
    "disco-sdk",
    "disco-service-kit",
    "disco-registry",
    "disco-memory",
    "disco-tracker",
    "disco-gateway",
)
SERVICES = ("registry", "memory", "tracker", "gateway")


def outside_env(
    extra: Mapping[str, str] | None = None, *, path: Path | None = None
) -> dict[str, str]:
    """A person's environment: this process's, without the workspace's virtualenv and
    paths, uv first on PATH (and ``path`` before it), plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"}
        and not key.startswith("DISCO_")
    }
    folders = [str(Path(uv_executable()).parent)]
    if path is not None:
        folders.insert(0, str(path))
    env["PATH"] = os.pathsep.join([*folders, env.get("PATH", "")])
    env.update(extra or {})
    return env


def run(
    command: list[str] | str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (a shell line when a string) and return what it printed."""
    return subprocess.run(
        command,
        cwd=cwd,
        env=dict(env) if env is not None else outside_env(),
        shell=isinstance(command, str),
        executable="/bin/bash" if isinstance(command, str) else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def must(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``result``, which must have succeeded (else the test fails with its output)."""
    assert result.returncode == 0, f"{result.args!r} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="package")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make dist`` into a folder of its own: the sdists and wheels, built once."""
    folder = tmp_path_factory.mktemp("dist")
    must(run(["make", "--no-print-directory", "dist", f"DIST={folder}"], ROOT, dict(os.environ)))
    return folder


def wheel(dist: Path, package: str) -> Path:
    """The wheel of ``package`` in ``dist``."""
    (found,) = dist.glob(f"{package.replace('-', '_')}-{VERSION}-py3-none-any.whl")
    return found


def make_venv(folder: Path, wheels: list[Path]) -> Path:
    """A fresh virtualenv at ``folder`` with ``wheels`` installed (their dependencies
    from the index), as a person would make it; returns its ``bin`` folder."""
    uv = uv_executable()
    must(run([uv, "venv", "--quiet", str(folder)], folder.parent))
    must(run([uv, "pip", "install", "--quiet", "--python", str(folder / "bin" / "python"),
              *map(str, wheels)], folder.parent))  # fmt: skip
    return folder / "bin"


@pytest.fixture(scope="package")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the repository (and outside any uv workspace)."""
    folder = tmp_path_factory.mktemp("outside")
    assert ROOT not in folder.parents
    return folder


@pytest.fixture(scope="package")
def sdk_venv(dist: Path, outside: Path) -> Path:
    """The ``bin`` folder of a virtualenv with the disco-sdk and disco-common wheels only."""
    return make_venv(outside / "sdk-venv", [wheel(dist, "disco-sdk"), wheel(dist, "disco-common")])


@pytest.fixture(scope="package")
def services_venv(dist: Path, outside: Path) -> Path:
    """The ``bin`` folder of a virtualenv with every disco wheel."""
    return make_venv(outside / "services-venv", [wheel(dist, package) for package in PACKAGES])
