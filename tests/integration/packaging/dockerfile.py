"""deploy/Dockerfile's build stage, run here without a Docker engine.

The build stage's ``ARG``, ``ENV``, ``WORKDIR``, ``COPY`` (from the build
context, filtered by deploy/Dockerfile.dockerignore) and ``RUN`` lines run in
order, with ``/app`` a temporary folder and ``uv`` from PATH; then, as the
runtime stage does, only the virtualenv is kept: the source tree is deleted.
What a service's image installs, and where its migrations are, is what this
leaves in the virtualenv.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
IGNORE = ROOT / "deploy" / "Dockerfile.dockerignore"


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the build stage, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    stage = joined.split(" AS build", 1)[1].split("\nFROM ", 1)[0]
    found = []
    for line in stage.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, arguments = line.partition(" ")
            found.append((instruction.upper(), arguments.strip()))
    return found


def _ignored() -> list[str]:
    patterns = []
    for line in IGNORE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            patterns.append(line.removeprefix("**/"))
    return patterns


def _copy(sources: list[str], destination: Path, into_folder: bool) -> None:
    patterns = _ignored()

    def ignore(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)}

    for source in sources:
        path = ROOT / source
        target = destination / path.name if into_folder else destination
        if path.is_dir():
            shutil.copytree(path, target, ignore=ignore, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def build_image_venv(app: Path, service: str, env: Mapping[str, str]) -> Path:
    """Run the build stage for ``SERVICE=service`` with ``/app`` at ``app``; return the
    virtualenv the runtime stage copies (the rest of ``app`` is deleted).

    ``env`` is the environment the RUN lines get (with the Dockerfile's ENV on top).
    Bytecode is not compiled (UV_COMPILE_BYTECODE=0): it changes no file that is read.
    """
    args = {"SERVICE": service}
    run_env = dict(env)

    def expand(text: str) -> str:
        text = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), text)
        return text.replace("/app", str(app))

    for instruction, arguments in _instructions(DOCKERFILE.read_text()):
        if instruction == "ARG":
            name, _, default = arguments.partition("=")
            args.setdefault(name, default)
        elif instruction == "ENV":
            for pair in shlex.split(arguments):
                name, _, value = pair.partition("=")
                run_env[name] = expand(value)
        elif instruction == "WORKDIR":
            Path(expand(arguments)).mkdir(parents=True, exist_ok=True)
        elif instruction == "COPY" and not arguments.startswith("--from="):
            *sources, destination = shlex.split(arguments)
            target = Path(expand(destination))
            _copy(sources, target, into_folder=destination.endswith("/") or len(sources) > 1)
        elif instruction == "RUN":
            command = re.sub(r"--mount=\S+\s*", "", expand(arguments))
            run_env["UV_COMPILE_BYTECODE"] = "0"
            done = subprocess.run(
                ["bash", "-c", command], cwd=app, env=run_env, capture_output=True, text=True
            )
            assert done.returncode == 0, f"RUN {command}:\n{done.stdout}{done.stderr}"
    venv = app / ".venv"
    for entry in app.iterdir():
        if entry != venv:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return venv
