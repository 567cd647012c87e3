"""`disco db upgrade` finds every service's migrations wherever disco is installed.

Issue 36 part 5: the sources sit at the top (migrations/<service>/), and the
upgrade finds them by package metadata from the installed wheels (a fresh
virtualenv outside the workspace), from this checkout (editable packages), and
from each service's image (deploy/Dockerfile's build steps, run here): each run
migrates a new database on the real PostgreSQL to the head of every service it holds.
"""

from __future__ import annotations

import json
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from disco._dev.dburl import with_database, with_user
from disco._dev.schema_wait import head_revision
from disco._dev.services import installed_services
from tests.fixtures.infra import APP_PASSWORD, APP_ROLE, schema_revisions
from tests.integration.packaging.conftest import SERVICES, must, outside_env, run
from tests.integration.packaging.dockerfile import build_image_venv


@cache
def heads() -> dict[str, str]:
    """Each service's newest revision, read from this checkout's migrations/<service>/."""
    return {service.name: head_revision(service) for service in installed_services()}


_WHERE = (
    "import json; from disco._dev.services import installed_services, migrations_dir; "
    "print(json.dumps({s.name: str(migrations_dir(s)) for s in installed_services()}))"
)


def database_env(postgres_admin_url: str) -> dict[str, str]:
    """DISCO_DATABASE_* of a database that does not exist yet (the upgrade creates it)."""
    admin = with_database(postgres_admin_url, f"disco_upgrade_{uuid.uuid4().hex[:10]}")
    return {
        "DISCO_DATABASE_ADMIN_URL": admin,
        "DISCO_DATABASE_URL": with_user(admin, APP_ROLE, APP_PASSWORD),
    }


def test_the_heads_are_read_from_the_migrations_at_the_top() -> None:
    assert set(heads()) == set(SERVICES)
    for name, head in heads().items():
        assert head.startswith(f"{name}_")


def test_from_the_installed_wheels_outside_the_workspace(
    services_venv: Path, outside: Path, postgres_admin_url: str
) -> None:
    database = database_env(postgres_admin_url)
    env = outside_env(database, path=services_venv)

    where = json.loads(
        must(run([str(services_venv / "python"), "-c", _WHERE], outside, env)).stdout
    )
    migrated = must(run(["disco", "db", "upgrade"], outside, env))

    site = services_venv.parent / "lib"
    assert set(where) == set(SERVICES)
    for name, folder in where.items():
        assert Path(folder).is_relative_to(site), folder  # inside the installed package
        assert Path(folder).name == "migrations"
        assert Path(folder).parent.name == f"disco_{name}"
    assert "migrated registry, memory, tracker, gateway" in migrated.stdout
    assert schema_revisions(database["DISCO_DATABASE_ADMIN_URL"], SERVICES) == heads()


def test_from_this_checkout_run_from_another_folder(
    tmp_path: Path, postgres_admin_url: str
) -> None:
    database = database_env(postgres_admin_url)
    disco = Path(sys.executable).parent / "disco"  # this checkout's, editable packages
    env = outside_env(database)

    where = json.loads(must(run([sys.executable, "-c", _WHERE], tmp_path, env)).stdout)
    migrated = must(run([str(disco), "db", "upgrade"], tmp_path, env))

    root = Path(__file__).resolve().parents[3]
    assert where == {name: str(root / "migrations" / name) for name in SERVICES}
    assert "migrated registry, memory, tracker, gateway" in migrated.stdout
    assert schema_revisions(database["DISCO_DATABASE_ADMIN_URL"], SERVICES) == heads()


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each service's image virtualenv, from deploy/Dockerfile's build steps (two at a time)."""
    env = outside_env()

    def build(name: str) -> Path:
        return build_image_venv(tmp_path_factory.mktemp(f"image-{name}") / "app", name, env)

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(SERVICES, pool.map(build, SERVICES), strict=True))


@pytest.mark.parametrize("name", SERVICES)
def test_from_each_service_s_image_its_own_migrations(
    name: str, images: dict[str, Path], tmp_path: Path, postgres_admin_url: str
) -> None:
    # What the compose `migrate-<name>` step and the Kubernetes migration Job run.
    database = database_env(postgres_admin_url)
    venv = images[name]
    # The image holds its own service only (the source tree is gone: the runtime
    # stage copies the virtualenv), and that service its migrations.
    (site,) = venv.glob("lib/python3.*/site-packages")
    packages = [p.name for p in site.glob("disco_*") if "." not in p.name]
    assert sorted(packages) == sorted(["disco_common", "disco_service", f"disco_{name}"])
    assert (site / f"disco_{name}" / "migrations" / "env.py").is_file()
    assert not (venv.parent / "migrations").exists()

    migrated = must(run([str(venv / "bin" / "disco"), "db", "upgrade", "--service", name],
                        tmp_path, outside_env(database)))  # fmt: skip

    assert f"migrated {name} at" in migrated.stdout
    admin = database["DISCO_DATABASE_ADMIN_URL"]
    assert schema_revisions(admin, [name]) == {name: heads()[name]}
