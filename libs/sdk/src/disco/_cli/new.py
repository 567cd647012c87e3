"""``disco new tool|worker|planner NAME``: scaffold a project with a runnable agent.

The project holds the agent, its passing test (``disco.testing``, no broker), a
``pyproject.toml`` that takes disco-sdk and disco-common from where the running
``disco`` came from (:mod:`disco._cli._origin`: this checkout, or the wheels it
was installed from, copied into the project), a Dockerfile and a Kubernetes
snippet for disco's overlays. Its printed next steps run as printed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import textwrap
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from string import Template
from typing import Annotated

import typer

from disco._cli._origin import DiscoOrigin, OriginError, OriginKind, running_disco

__all__ = ["Kind", "new", "scaffold"]

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_TEMPLATES = resources.files("disco._cli") / "templates"


class Kind(StrEnum):
    """What to scaffold."""

    TOOL = "tool"
    WORKER = "worker"
    PLANNER = "planner"


@dataclass(frozen=True)
class _Agent:
    request: str
    """The event type it takes, after the agent's name."""
    example: str
    """Data a caller can send, as JSON."""
    note: str = ""
    """What the request needs beside the agent, for the README."""


_AGENTS = {
    Kind.TOOL: _Agent("requested", '{"text": "one two three"}'),
    Kind.WORKER: _Agent(
        "requested",
        '{"topic": "kafka"}',
        "\nIt answers once an agent answers `{name}.lookup.requested` (the lookup it\n"
        "delegates; `disco.testing` plays that agent in its tests).\n",
    ),
    Kind.PLANNER: _Agent(
        "goal",
        '{"topic": "kafka"}',
        "\nIts plan answers once agents answer `{name}.search.requested` and\n"
        "`{name}.summarize.requested` (its states' actions; `disco.testing` plays\n"
        "them in its tests).\n",
    ),
}


def _template(template: str, /, **values: str) -> str:
    return Template(_TEMPLATES.joinpath(template).read_text()).substitute(values)


def _toml_path(path: Path) -> str:
    return path.as_posix().replace("\\", "\\\\").replace('"', '\\"')


def _where(location: Path, project: Path) -> Path:
    """``location`` relative to ``project`` when both sit in one disco checkout, else absolute."""
    for folder in location.parents:
        if (folder / "libs" / "sdk").is_dir() and folder in project.parents:
            return Path(os.path.relpath(location, project))
    return location


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


def _comment(text: str) -> str:
    return "".join(f"# {line}\n" for line in _wrap(text, 86))


def _sources(origin: DiscoOrigin, project: Path) -> tuple[str, list[str], str]:
    """The version pin, the ``[tool.uv.sources]`` lines, and in words where disco comes from."""
    if origin.kind is OriginKind.FILE:
        lines = [
            f'{s.name} = {{ path = "wheels/{Path(s.location).name}" }}' for s in origin.sources
        ]
        made_from = Path(origin.sources[0].location).parent
        return (
            f"=={origin.version}",
            lines,
            (
                f"the wheels the `disco` that made this project was installed from ({made_from}), "
                "copied into wheels/"
            ),
        )
    if origin.kind is OriginKind.URL:
        lines = [f'{s.name} = {{ url = "{s.location}" }}' for s in origin.sources]
        return "", lines, "the URLs the `disco` that made this project was installed from"
    lines = []
    for source in origin.sources:
        where = _toml_path(_where(Path(source.location), project))
        editable = ", editable = true" if source.editable else ""
        lines.append(f'{source.name} = {{ path = "{where}"{editable} }}')
    checkout = origin.checkout or Path(origin.sources[0].location)
    live = " (editable: a change there shows here at once)" if origin.sources[0].editable else ""
    return "", lines, f"the disco checkout at {checkout}{live}"


_NEVER_BY_NAME = (
    "never from a package index by name alone: disco is not published yet, and a package "
    "of that name on an index would not be disco's. Once it is published, {switch}: "
    "disco-sdk then comes from your index."
)
_CHECKOUT_DOCKERFILE = (
    "disco comes from a checkout outside this folder (pyproject.toml's [tool.uv.sources]), "
    'which a build here cannot see: see README.md, "Ship it".'
)
_CHECKOUT_README = """
  A build sees only this folder, and this project takes disco from a checkout
  outside it: run `make dist` in the checkout, and `disco new` run from those
  wheels (installed in a virtualenv) makes a project that carries them in wheels/."""


def _origin_parts(origin: DiscoOrigin, project: Path) -> dict[str, str]:
    """The pyproject's dependencies and sources, and what the README and Dockerfile say."""
    if origin.kind is OriginKind.INDEX:
        index = f"disco-sdk {origin.version} comes from your package index, as the `disco` "
        return {
            "dependencies": f'    "disco-sdk=={origin.version}",\n',
            "sources": "",
            "origin_text": index + "that made this project did.",
            **dict.fromkeys(("origin_note", "copy_wheels", "docker_note"), ""),
        }
    pin, lines, place = _sources(origin, project)
    switch = "delete [tool.uv.sources] and the disco-common line"
    if origin.kind is OriginKind.FILE:
        switch += " and wheels/"
    if not pin:
        switch += f' and pin a release ("disco-sdk=={origin.version}")'
    never = _NEVER_BY_NAME.format(switch=switch)
    checkout = origin.kind is OriginKind.FOLDER
    return {
        "dependencies": f'    "disco-sdk{pin}",\n'
        "    # disco-sdk's contracts, listed so that uv takes them from the same place (below).\n"
        f'    "disco-common{pin}",\n',
        "sources": f"\n{_comment(f'Where disco comes from: {place}; {never}')}[tool.uv.sources]\n"
        + "".join(f"{line}\n" for line in lines),
        "origin_text": "\n".join(
            _wrap(
                f"disco-sdk and disco-common come from {place}, as `[tool.uv.sources]` in "
                f"`pyproject.toml` says: {never}",
                80,
            )
        ),
        "origin_note": f"#\n{_comment(_CHECKOUT_DOCKERFILE)}" if checkout else "",
        "copy_wheels": "COPY wheels/ /app/wheels/\n" if origin.kind is OriginKind.FILE else "",
        "docker_note": _CHECKOUT_README if checkout else "",
    }


def scaffold(
    kind: Kind, name: str, directory: Path, origin: DiscoOrigin | None = None
) -> list[Path]:
    """Write a project with a runnable ``kind`` agent called ``name`` into ``directory/name``.

    Args:
        origin: where disco comes from (default: where the running disco came from).

    Returns:
        The files written, the agent's module third.

    Raises:
        ValueError: ``name`` is not a valid agent name, or the folder exists.
        OriginError: the running disco's origin cannot be given to the project.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a good agent name: use lower-case letters, digits and '-', "
            "starting with a letter (e.g. 'word-counter')"
        )
    target = directory / name
    if target.exists():
        raise ValueError(f"{target} exists already: choose another name or folder")
    origin = origin or running_disco()
    agent = _AGENTS[kind]
    module = name.replace("-", "_")
    values = {
        "name": name,
        "module": module,
        "cls": "".join(part.capitalize() for part in name.split("-")),
        "kind": kind.value,
        "request": f"{name}.{agent.request}",
        "example": agent.example,
        "try_note": agent.note.format(name=name),
        **_origin_parts(origin, target.absolute()),
    }
    files = {
        target / "pyproject.toml": _template("pyproject.toml.tmpl", **values),
        target / "README.md": _template("README.md.tmpl", **values),
        target / f"{module}.py": _template(f"{kind.value}.py.tmpl", **values),
        target / f"test_{module}.py": _template(f"test_{kind.value}.py.tmpl", **values),
        target / "Dockerfile": _template("Dockerfile.tmpl", **values),
        target / ".dockerignore": _template("dockerignore.tmpl"),
        target / ".gitignore": _template("gitignore.tmpl"),
        target / "k8s" / "kustomization.yaml": _template("k8s/kustomization.yaml.tmpl", **values),
        target / "k8s" / "deployment.yaml": _template("k8s/deployment.yaml.tmpl", **values),
    }
    (target / "k8s").mkdir(parents=True)
    for path, text in files.items():
        path.write_text(text)
    written = list(files)
    if origin.kind is OriginKind.FILE:
        (target / "wheels").mkdir()
        for source in origin.sources:
            written.append(Path(shutil.copy2(source.location, target / "wheels")))
    return written


def new(
    kind: Annotated[Kind, typer.Argument(help="What to make: tool, worker or planner.")],
    name: Annotated[str, typer.Argument(help="The agent's name, e.g. word-counter.")],
    directory: Annotated[
        Path, typer.Option("--dir", "-d", help="Where to create the agent's folder.")
    ] = Path("."),
) -> None:
    """Scaffold a project with a runnable agent and its test (`disco new tool word-counter`)."""
    try:
        files = scaffold(kind, name, directory)
    except (ValueError, OriginError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    folder = files[0].parent
    typer.echo(f"created {folder}/")
    for path in files:
        typer.echo(f"  {path.relative_to(folder)}")
    agent = _AGENTS[kind]
    typer.echo(
        "\nnext steps:\n"
        f"  cd {shlex.quote(str(folder))}\n"
        "  uv run pytest                  # its tests: no broker, no services\n"
        f"  uv run python {files[2].name:<16} # serve it against a running stack (make dev)\n"
        f"then, in another terminal in {folder}:\n"
        f"  uv run disco ask {name}.{agent.request} '{agent.example}'"
    )
    if agent.note:
        typer.echo(agent.note.format(name=name).rstrip())
