"""Services and their migrations are found by package metadata, wherever the process runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import disco_gateway
import disco_memory
import disco_registry
import disco_tracker
from disco._dev.errors import DevStackError
from disco._dev.services import installed_services, migrations_dir, select_services
from disco._dev.settings import DevSettings
from disco_common.services import ServiceManifest
from tests.fixtures.infra import DatabaseUrls, schema_revisions

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = {
    "registry": disco_registry,
    "memory": disco_memory,
    "tracker": disco_tracker,
    "gateway": disco_gateway,
}
# The newest revision of each service: the files moved to migrations/<service>/ as they were.
HEADS = {
    "registry": "registry_0008",
    "memory": "memory_0010",
    "tracker": "tracker_0004",
    "gateway": "gateway_0013",
}


def test_each_installed_service_names_its_module_port_and_its_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is looked up from the working folder

    services = {service.name: service for service in installed_services()}

    assert set(services) == set(PACKAGES)
    for name, package in PACKAGES.items():
        service = services[name]
        settings_cls = getattr(package, f"{name.capitalize()}Settings")
        assert service.module == package.__name__
        assert service.default_port == settings_cls.model_fields["port"].default
        assert service.migrations == f"{package.__name__}:migrations"  # where its wheel has them
        # This checkout installs the packages editable: the sources at the top.
        assert migrations_dir(service) == ROOT / "migrations" / name
        # sources only at the top (a stale __pycache__ of an old checkout is not a source)
        assert not list((Path(package.__file__).parent / "migrations").rglob("*.py"))


def test_a_package_without_migrations_outside_a_checkout_is_refused_with_the_places_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "disco_nowhere"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(package.parent))
    service = ServiceManifest(
        name="nowhere",
        module="disco_nowhere",
        default_port=8099,
        migrations="disco_nowhere:migrations",
    )

    with pytest.raises(DevStackError, match="no Alembic environment for nowhere") as raised:
        migrations_dir(service)

    assert str(package / "migrations" / "env.py") in str(raised.value)
    assert "migrations/nowhere/env.py" in str(raised.value)


def test_services_start_registry_first_and_gateway_last() -> None:
    names = [service.name for service in select_services(["gateway", "tracker", "registry"])]

    assert names == ["registry", "tracker", "gateway"]


def test_an_unknown_service_is_refused_with_the_installed_ones_listed() -> None:
    with pytest.raises(DevStackError, match=r"unknown service\(s\) \['nope'\].*registry"):
        select_services(["registry", "nope"])


def test_a_service_port_comes_from_its_own_variable_else_from_its_manifest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, memory = select_services(["registry", "memory"])
    monkeypatch.setenv("DISCO_REGISTRY_PORT", "9081")
    monkeypatch.delenv("DISCO_MEMORY_PORT", raising=False)

    assert DevSettings().service_port(registry) == 9081
    assert DevSettings().service_port(memory) == 8082
    monkeypatch.setenv("DISCO_REGISTRY_PORT", "not-a-port")
    with pytest.raises(DevStackError, match="DISCO_REGISTRY_PORT"):
        DevSettings().service_port(registry)


def test_every_schema_is_at_its_head_revision_in_its_own_version_table(
    database: DatabaseUrls,
) -> None:
    assert schema_revisions(database.admin, HEADS) == HEADS
