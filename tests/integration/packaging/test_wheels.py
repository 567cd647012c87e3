"""`make dist` builds every package with one version, and the SDK installs anywhere.

Issue 33 part 2: a wheel and an sdist of each of the seven packages, one version
(VERSION), disco's own dependencies pinned to it, ``py.typed`` in each, each
service's migrations inside its wheel; the SDK's wheels in a fresh virtualenv
outside the workspace: ``import disco``, ``disco --help``, ``disco new``.
"""

from __future__ import annotations

import re
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

from tests.integration.packaging.conftest import (
    PACKAGES,
    ROOT,
    SERVICES,
    VERSION,
    must,
    outside_env,
    run,
    wheel,
)

MODULES = {
    "disco-common": "disco_common",
    "disco-sdk": "disco",
    "disco-service-kit": "disco_service",
    **{f"disco-{name}": f"disco_{name}" for name in SERVICES},
}


def _metadata(wheel_file: Path) -> list[tuple[str, str]]:
    with zipfile.ZipFile(wheel_file) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return list(Parser().parsestr(archive.read(name).decode()).items())


def _disco_requirements(wheel_file: Path) -> dict[str, str]:
    found = {}
    for key, value in _metadata(wheel_file):
        match = re.fullmatch(r"(disco-[a-z-]+)(\[[a-z,]+\])?(.*)", value)
        if key == "Requires-Dist" and match:
            found[match.group(1)] = match.group(3)
    return found


def test_every_package_has_an_sdist_and_a_wheel_of_the_one_version(dist: Path) -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([a-z]+\d+)?", VERSION)
    expected = {
        name
        for package in PACKAGES
        for name in (
            f"{package.replace('-', '_')}-{VERSION}.tar.gz",
            f"{package.replace('-', '_')}-{VERSION}-py3-none-any.whl",
        )
    }

    assert {path.name for path in dist.iterdir() if path.name != ".gitignore"} == expected
    for package in PACKAGES:
        assert dict(_metadata(wheel(dist, package)))["Version"] == VERSION


def test_disco_s_own_dependencies_are_pinned_to_that_version(dist: Path) -> None:
    pins = {package: _disco_requirements(wheel(dist, package)) for package in PACKAGES}

    assert pins["disco-common"] == {}
    assert pins["disco-sdk"] == {"disco-common": f"=={VERSION}"}
    assert pins["disco-service-kit"] == {
        "disco-common": f"=={VERSION}",
        "disco-sdk": f"=={VERSION}",
    }
    for name in ("registry", "memory", "tracker"):
        assert pins[f"disco-{name}"] == {
            "disco-common": f"=={VERSION}",
            "disco-service-kit": f"=={VERSION}",
        }
    assert pins["disco-gateway"] == dict.fromkeys(
        ("disco-common", "disco-sdk", "disco-service-kit"), f"=={VERSION}"
    )


def test_every_wheel_is_typed_and_each_service_carries_its_migrations(dist: Path) -> None:
    for package, module in MODULES.items():
        with zipfile.ZipFile(wheel(dist, package)) as archive:
            names = set(archive.namelist())
        assert f"{module}/py.typed" in names, package
        carried = {n.removeprefix(f"{module}/migrations/") for n in names if "/migrations/" in n}
        service = package.removeprefix("disco-")
        if service in SERVICES:
            top = ROOT / "migrations" / service
            assert carried == {
                path.relative_to(top).as_posix()
                for path in top.rglob("*")
                if path.is_file() and "__pycache__" not in path.parts
            }, package
        else:
            assert carried == set(), package


def test_a_service_s_sdist_holds_its_migrations_and_its_build_hook(dist: Path) -> None:
    # Its wheel (the one above: `uv build` makes it from the sdist) is built without
    # the repository around it: the sdist holds the migrations.
    with tarfile.open(dist / f"disco_memory-{VERSION}.tar.gz") as archive:
        names = set(archive.getnames())
    root = f"disco_memory-{VERSION}"
    assert f"{root}/src/disco_memory/migrations/env.py" in names
    assert f"{root}/hatch_build.py" in names
    assert f"{root}/PKG-INFO" in names


def test_the_sdk_wheel_works_in_a_fresh_virtualenv_outside_the_workspace(
    sdk_venv: Path, outside: Path
) -> None:
    env = outside_env(path=sdk_venv)

    imported = must(run([str(sdk_venv / "python"), "-c",
                         "import disco, disco_common, disco.testing; print(disco.__file__)"],
                        outside, env))  # fmt: skip
    helped = must(run(["disco", "--help"], outside, env))
    made = must(run(["disco", "new", "tool", "from-the-wheel"], outside, env))

    assert Path(imported.stdout.strip()).is_relative_to(sdk_venv.parent)
    for command in ("dev", "db", "new", "ask", "tail", "token"):
        assert f" {command} " in helped.stdout, command
    assert "next steps:" in made.stdout
    project = outside / "from-the-wheel"
    assert (project / "wheels" / f"disco_sdk-{VERSION}-py3-none-any.whl").is_file()
    assert (project / "from_the_wheel.py").is_file()
