"""Where the running disco came from decides where a new project takes disco from.

The installer's record (PEP 610 ``direct_url.json``) is played by fake
distributions; the projects are written with each origin and read back.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from importlib.metadata import Distribution, PackageNotFoundError
from os import PathLike
from pathlib import Path

import pytest

from disco._cli._origin import DiscoOrigin, OriginError, OriginKind, Source, running_disco
from disco._cli.new import Kind, scaffold


class FakeDistribution(Distribution):
    """A distribution with a version and, when given, a ``direct_url.json``."""

    def __init__(self, version: str, direct_url: dict[str, object] | None) -> None:
        self._version = version
        self._direct_url = direct_url

    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: x\nVersion: {self._version}\n"
        if filename == "direct_url.json" and self._direct_url is not None:
            return json.dumps(self._direct_url)
        return None

    def locate_file(self, path: str | PathLike[str]) -> Path:
        # Abstract in Distribution; the origin lookup reads only the texts above, so a
        # call here would be a new dependency of the code under test: fail loudly.
        raise AssertionError(f"the origin lookup asked for a file: {path}")


def finder(**recorded: dict[str, object] | None) -> Callable[[str], Distribution]:
    def find(name: str) -> Distribution:
        key = name.replace("-", "_")
        if key not in recorded:
            raise PackageNotFoundError(name)
        return FakeDistribution("1.2.3", recorded[key])

    return find


def wheel(path: Path) -> dict[str, object]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not really a wheel")
    return {"url": path.as_uri(), "archive_info": {}}


def folder(path: Path) -> dict[str, object]:
    path.mkdir(parents=True, exist_ok=True)
    return {"url": path.as_uri(), "dir_info": {"editable": True}}


def test_editable_folders_are_a_checkout(tmp_path: Path) -> None:
    origin = running_disco(
        finder(
            disco_sdk=folder(tmp_path / "disco" / "libs" / "sdk"),
            disco_common=folder(tmp_path / "disco" / "libs" / "common"),
        )
    )

    assert origin.kind is OriginKind.FOLDER
    assert origin.checkout == tmp_path / "disco"
    assert [(s.name, s.editable) for s in origin.sources] == [
        ("disco-sdk", True),
        ("disco-common", True),
    ]


def test_wheel_files_are_files(tmp_path: Path) -> None:
    origin = running_disco(
        finder(
            disco_sdk=wheel(tmp_path / "dist" / "disco_sdk-1.2.3-py3-none-any.whl"),
            disco_common=wheel(tmp_path / "dist" / "disco_common-1.2.3-py3-none-any.whl"),
        )
    )

    assert origin == DiscoOrigin(
        OriginKind.FILE,
        "1.2.3",
        (
            Source("disco-sdk", str(tmp_path / "dist" / "disco_sdk-1.2.3-py3-none-any.whl")),
            Source("disco-common", str(tmp_path / "dist" / "disco_common-1.2.3-py3-none-any.whl")),
        ),
    )


def test_disco_common_found_beside_the_sdk_wheel_when_installed_through_find_links(
    tmp_path: Path,
) -> None:
    common = tmp_path / "dist" / "disco_common-1.2.3-py3-none-any.whl"
    common.parent.mkdir()
    common.write_bytes(b"")

    origin = running_disco(
        finder(
            disco_sdk=wheel(tmp_path / "dist" / "disco_sdk-1.2.3-py3-none-any.whl"),
            disco_common=None,
        )
    )

    assert origin.sources[1] == Source("disco-common", str(common))


def test_disco_common_from_nowhere_beside_an_sdk_wheel_is_refused_with_the_fix(
    tmp_path: Path,
) -> None:
    find = finder(disco_sdk=wheel(tmp_path / "disco_sdk-1.2.3-py3-none-any.whl"), disco_common=None)

    with pytest.raises(OriginError, match=r"install both wheels .*disco_common-\*\.whl"):
        running_disco(find)


def test_a_wheel_that_is_gone_is_refused_with_the_fix(tmp_path: Path) -> None:
    gone = {"url": (tmp_path / "disco_sdk-1.2.3-py3-none-any.whl").as_uri(), "archive_info": {}}

    with pytest.raises(OriginError, match=r"which is gone: rebuild it \(`make dist`"):
        running_disco(finder(disco_sdk=gone, disco_common=gone))


def test_no_record_is_an_index_and_urls_are_urls() -> None:
    assert running_disco(finder(disco_sdk=None, disco_common=None)) == DiscoOrigin(
        OriginKind.INDEX, "1.2.3", ()
    )
    url = {"url": "https://example.org/disco_sdk-1.2.3-py3-none-any.whl", "archive_info": {}}
    origin = running_disco(finder(disco_sdk=url, disco_common=url))
    assert origin.kind is OriginKind.URL


def test_a_missing_package_is_refused() -> None:
    with pytest.raises(OriginError, match="disco-common"):
        running_disco(finder(disco_sdk=None))


def _pyproject(project: Path) -> dict[str, object]:
    return tomllib.loads((project / "pyproject.toml").read_text())


def test_a_project_from_wheels_carries_copies_and_pins_them(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    origin = running_disco(
        finder(
            disco_sdk=wheel(dist / "disco_sdk-1.2.3-py3-none-any.whl"),
            disco_common=wheel(dist / "disco_common-1.2.3-py3-none-any.whl"),
        )
    )

    files = scaffold(Kind.TOOL, "counter", tmp_path / "work", origin)

    project = tmp_path / "work" / "counter"
    pyproject = _pyproject(project)
    assert pyproject["project"]["dependencies"] == [  # type: ignore[index]
        "disco-sdk==1.2.3",
        "disco-common==1.2.3",
    ]
    assert pyproject["tool"]["uv"]["sources"] == {  # type: ignore[index]
        "disco-sdk": {"path": "wheels/disco_sdk-1.2.3-py3-none-any.whl"},
        "disco-common": {"path": "wheels/disco_common-1.2.3-py3-none-any.whl"},
    }
    assert (project / "wheels" / "disco_sdk-1.2.3-py3-none-any.whl").read_bytes() == (
        dist / "disco_sdk-1.2.3-py3-none-any.whl"
    ).read_bytes()
    assert project / "wheels" / "disco_common-1.2.3-py3-none-any.whl" in files
    dockerfile = (project / "Dockerfile").read_text()
    assert dockerfile.index("COPY wheels/ /app/wheels/") < dockerfile.index("uv sync --locked")
    assert str(dist) in (project / "README.md").read_text()


def test_a_project_inside_the_checkout_names_it_relatively(tmp_path: Path) -> None:
    checkout = tmp_path / "disco"
    origin = running_disco(
        finder(
            disco_sdk=folder(checkout / "libs" / "sdk"),
            disco_common=folder(checkout / "libs" / "common"),
        )
    )

    scaffold(Kind.WORKER, "helper", checkout / "agents", origin)

    assert _pyproject(checkout / "agents" / "helper")["tool"]["uv"]["sources"] == {  # type: ignore[index]
        "disco-sdk": {"path": "../../libs/sdk", "editable": True},
        "disco-common": {"path": "../../libs/common", "editable": True},
    }


def test_a_project_from_an_index_pins_the_release_and_names_no_source(tmp_path: Path) -> None:
    scaffold(Kind.PLANNER, "planner", tmp_path, DiscoOrigin(OriginKind.INDEX, "1.2.3", ()))

    project = tmp_path / "planner"
    pyproject = _pyproject(project)
    assert pyproject["project"]["dependencies"] == ["disco-sdk==1.2.3"]  # type: ignore[index]
    assert "sources" not in pyproject.get("tool", {}).get("uv", {})  # type: ignore[attr-defined]
    assert "COPY wheels" not in (project / "Dockerfile").read_text()
