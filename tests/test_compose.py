"""docker-compose.yml and deploy/Dockerfile agree with the code.

There is no Docker engine here, so these tests read the files and check every
name they use against the code: commands are real modules or CLI commands,
ports are the services' defaults, every DISCO_* variable is a setting the
process reads (with a value it accepts), health checks hit real routes, and the
image installs real workspace packages.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from disco._dev import migrate
from disco._dev.services import installed_services, migrations_dir
from disco._dev.settings import DevSettings
from disco_gateway import GatewaySettings
from disco_gateway import create_app as create_gateway
from disco_memory import MemorySettings
from disco_memory import create_app as create_memory
from disco_registry import RegistrySettings
from disco_registry import create_app as create_registry
from disco_service import ServiceSettings, settings_env_vars
from disco_tracker import TrackerSettings
from disco_tracker import create_app as create_tracker

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()

SERVICES: dict[str, tuple[type[ServiceSettings], Any]] = {
    "registry": (RegistrySettings, create_registry),
    "memory": (MemorySettings, create_memory),
    "tracker": (TrackerSettings, create_tracker),
    "gateway": (GatewaySettings, create_gateway),
}
INFRASTRUCTURE = {"kafka", "postgres"}
_HEALTH_URL = re.compile(r"http://127\.0\.0\.1:(\d+)(/[A-Za-z0-9_/.-]*)")


def compose_service(name: str) -> dict[str, Any]:
    service: dict[str, Any] = COMPOSE["services"][name]
    return service


def environment(name: str) -> dict[str, str]:
    env = compose_service(name).get("environment") or {}
    assert isinstance(env, dict), f"{name}: write environment as a mapping"
    return {key: str(value) for key, value in env.items()}


def container_ports(name: str) -> list[int]:
    return [int(str(mapping).rsplit(":", 1)[-1]) for mapping in compose_service(name)["ports"]]


def cli_command(path: list[str]) -> object | None:
    from disco._cli.main import app

    command: object | None = typer.main.get_command(app)
    for word in path:
        subcommands = getattr(command, "commands", None)
        if not isinstance(subcommands, dict):
            return None
        command = subcommands.get(word)
    return command


def test_compose_has_the_four_services_kafka_postgres_and_migrations() -> None:
    assert set(COMPOSE["services"]) == {*SERVICES, *INFRASTRUCTURE, "migrate"}


def test_the_installed_services_are_the_ones_compose_runs() -> None:
    assert [service.name for service in installed_services()] == [
        "registry",
        "memory",
        "tracker",
        "gateway",
    ]
    assert {service.name for service in installed_services()} == set(SERVICES)


@pytest.mark.parametrize("name", [*SERVICES, "migrate"])
def test_every_command_names_a_real_module_or_cli_command(name: str) -> None:
    command = compose_service(name)["command"]
    if command[:2] == ["python", "-m"]:
        module = command[2]
        assert importlib.util.find_spec(module) is not None, module
        assert importlib.util.find_spec(f"{module}.__main__") is not None, module
    else:
        assert command[0] == "disco"
        scripts = tomllib.loads((ROOT / "libs/sdk/pyproject.toml").read_text())["project"]
        assert "disco" in scripts["scripts"]
        assert cli_command(command[1:]) is not None, f"no `{' '.join(command)}` command"


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_runs_its_own_module(name: str) -> None:
    assert compose_service(name)["command"] == ["python", "-m", f"disco_{name}"]


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_port_is_its_settings_default(name: str) -> None:
    settings_cls, _ = SERVICES[name]
    default = settings_cls.model_fields["port"].default
    assert container_ports(name) == [default]
    assert environment(name).get(f"DISCO_{name.upper()}_PORT", str(default)) == str(default)


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_sets_only_disco_variables_its_settings_read(name: str) -> None:
    settings_cls, _ = SERVICES[name]
    known = settings_env_vars(settings_cls)
    unknown = sorted(key for key in environment(name) if key not in known)
    assert unknown == [], f"{name} sets variables no setting reads: {unknown}"


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_environment_makes_valid_settings(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_cls, _ = SERVICES[name]
    for key in list(settings_env_vars(settings_cls)):
        monkeypatch.delenv(key, raising=False)
    for key, value in environment(name).items():
        monkeypatch.setenv(key, value)
    settings = settings_cls()
    assert settings.host == "0.0.0.0"  # noqa: S104 - inside a container
    assert settings.kafka_bootstrap.startswith("kafka:")
    assert "@postgres:5432/" in settings.database_url


def _cli_variables() -> set[str]:
    # What `disco db upgrade` reads: its settings, and the variables the
    # migration runner reads directly.
    names = set(settings_env_vars(DevSettings))
    names.update(re.findall(r"DISCO_[A-Z_]+", inspect.getsource(migrate)))
    return names


def test_the_migrate_step_sets_only_variables_the_cli_reads() -> None:
    unknown = sorted(set(environment("migrate")) - _cli_variables())
    assert unknown == []


def test_the_migrate_step_connects_as_the_owner_and_names_the_app_role() -> None:
    env = environment("migrate")
    assert env["DISCO_DATABASE_URL"] == environment("registry")["DISCO_DATABASE_URL"]
    assert env["DISCO_DATABASE_ADMIN_URL"] != env["DISCO_DATABASE_URL"]


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_health_check_calls_a_real_route_on_the_service_port(name: str) -> None:
    settings_cls, create_app = SERVICES[name]
    check = " ".join(compose_service(name)["healthcheck"]["test"])
    match = _HEALTH_URL.search(check)
    assert match is not None, check
    port, path = int(match.group(1)), match.group(2)
    assert port == settings_cls.model_fields["port"].default
    assert path in create_app(settings_cls()).openapi()["paths"]


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_waits_for_its_dependencies_and_the_migrations(name: str) -> None:
    depends = compose_service(name)["depends_on"]
    assert depends["postgres"]["condition"] == "service_healthy"
    assert depends["kafka"]["condition"] == "service_healthy"
    assert depends["migrate"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("name", sorted(INFRASTRUCTURE))
def test_infrastructure_has_a_health_check(name: str) -> None:
    assert compose_service(name)["healthcheck"]["test"]


def test_kafka_runs_in_kraft_mode_and_postgres_has_pgvector() -> None:
    assert compose_service("kafka")["image"].startswith("apache/kafka:")
    assert environment("kafka")["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert compose_service("postgres")["image"].startswith("pgvector/pgvector:")


def test_all_disco_containers_use_the_one_image_built_from_deploy_dockerfile() -> None:
    for name in [*SERVICES, "migrate"]:
        service = compose_service(name)
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert service["image"] == compose_service("registry")["image"]


def _workspace_members() -> dict[str, Path]:
    members: dict[str, Path] = {}
    for pyproject in [*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")]:
        members[tomllib.loads(pyproject.read_text())["project"]["name"]] = pyproject
    return members


def test_the_dockerfile_installs_every_service_package_from_the_lock() -> None:
    packages = set(re.findall(r"--package ([a-z0-9-]+)", DOCKERFILE))
    assert packages == {f"disco-{name}" for name in SERVICES}
    assert packages <= set(_workspace_members())
    assert "uv sync --frozen --no-dev --no-install-workspace" in DOCKERFILE


def test_the_dockerfile_copies_every_member_pyproject_before_the_dependency_layer() -> None:
    dependency_layer = DOCKERFILE.split("--no-install-workspace")[0]
    for pyproject in _workspace_members().values():
        relative = pyproject.relative_to(ROOT).as_posix()
        assert f"COPY {relative} " in dependency_layer, relative


def test_the_dockerfile_runs_as_a_non_root_user() -> None:
    assert re.search(r"^USER (?!root)\w+", DOCKERFILE, re.MULTILINE)
    assert "FROM python:3.11-slim" in DOCKERFILE


@pytest.mark.parametrize("name", list(SERVICES))
def test_the_image_ships_each_service_s_migrations_inside_its_package(name: str) -> None:
    # The image installs the packages from `COPY services` (not editable): the
    # Alembic environment must sit inside the package the manifest names.
    (service,) = [service for service in installed_services() if service.name == name]
    location = migrations_dir(service)

    assert location == ROOT / "services" / name / "src" / f"disco_{name}" / "migrations"
    assert (location / "script.py.mako").is_file()
    assert sorted(location.glob("versions/0001_*.py"))
    assert "COPY services /app/services" in DOCKERFILE
    assert "--no-editable" in DOCKERFILE
    assert "DISCO_MIGRATIONS_DIR" not in DOCKERFILE
