"""``make fuzz``: schemathesis over every service's OpenAPI, against the real services.

Starts an embedded PostgreSQL and broker on free loopback ports (or uses
``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP``), a fresh database
migrated to head, the four services as processes (the gateway pointed at the
other three), and runs ``schemathesis run`` on each one's ``/openapi.json`` with
a valid token (an admin's, so the admin-only routes are reached too) and a
bounded number of examples. Three checks: no server error (5xx), every
response conforms to its declared schema (body and content type) and its
status code is a declared one. Exits non-zero on any finding.

    uv run python -m tests.fuzz [--max-examples N] [--max-seconds S] [--service NAME ...]

``tests/e2e/test_fuzz.py`` runs the same with small bounds inside ``make test``.
Findings are listed per service from schemathesis' JUnit report
(``fuzz-reports/<service>.xml``); reproducers land in ``.schemathesis/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from disco._dev.broker import EmbeddedBroker
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from tests.fixtures.infra import migrated_database
from tests.fixtures.processes import (
    STACK_BUS_ENV,
    ServiceProcess,
    start_services,
    stop_services,
)

SERVICES = ("registry", "memory", "tracker", "gateway")
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"
CONFIG = Path(__file__).with_name("fuzz.toml")
REPORTS = Path(__file__).resolve().parent.parent / "fuzz-reports"
_UPSTREAMS = {
    "registry": "DISCO_REGISTRY_URL",
    "memory": "DISCO_MEMORY_URL",
    "tracker": "DISCO_TRACKER_URL",
}


@dataclass(frozen=True)
class Bounds:
    """How much fuzzing each service gets."""

    max_examples: int = 15
    max_seconds: int = 60
    phases: str = "examples,coverage,fuzzing"
    seed: int = 1
    """Schemathesis' seed: one run repeats exactly; another seed explores other inputs."""


@dataclass
class ServiceResult:
    """What schemathesis found in one service: failed checks, and its own errors."""

    service: str
    exit_code: int
    seconds: float
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.failures and not self.errors and self.exit_code == 0


def _findings(report: Path) -> tuple[list[str], list[str]]:
    """(failed checks, schemathesis errors) of a JUnit report, one line per operation."""
    if not report.exists():
        return [], [f"no report at {report}"]
    root = ElementTree.parse(report).getroot()  # noqa: S314 - schemathesis' report, ours
    failures: list[str] = []
    errors: list[str] = []
    for case in root.iter("testcase"):
        for element, found in (("failure", failures), ("error", errors)):
            for item in case.iter(element):
                text = (item.get("message") or item.text or "").strip().splitlines()
                found.append(f"{case.get('name')}: {' / '.join(text[:6])}")
    return failures, errors


def _log_errors(service: ServiceProcess) -> list[str]:
    """The error-level lines of a service's JSON log (an unhandled exception, say)."""
    if not service.log.exists():
        return []
    found = []
    for line in service.log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("level") in {"error", "critical"}:
            found.append(f"{record.get('event')} {record.get('path', '')}".strip())
    return found


def _schemathesis(url: str, token: str, bounds: Bounds, report: Path) -> int:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        CHECKS,
        "--max-examples",
        str(bounds.max_examples),
        "--max-time",
        str(bounds.max_seconds),
        "--phases",
        bounds.phases,
        "--request-timeout",
        "30",
        "--seed",
        str(bounds.seed),
        "--continue-on-failure",
        "--no-color",
        "--report",
        "junit",
        "--report-junit-path",
        str(report),
    ]
    return subprocess.run(command, check=False).returncode


async def _provision(settings: BusSettings) -> None:
    async with BusClient(settings) as bus:
        await bus.ensure_topics()


@contextmanager
def fuzz_stack(
    admin_url: str, bootstrap: str, folder: Path, *, names: Sequence[str] = SERVICES
) -> Iterator[dict[str, ServiceProcess]]:
    """The services to fuzz, running on a database of their own (at ``admin_url``'s server).

    The gateway calls the other three, so they always run; it runs when in ``names``.
    """
    database = migrated_database(admin_url)
    prefix = f"fuzz{uuid.uuid4().hex[:8]}."
    asyncio.run(_provision(BusSettings(kafka_bootstrap=bootstrap, topic_prefix=prefix)))
    env = {
        "DISCO_ENV": "dev",
        "DISCO_DATABASE_URL": database.app,
        "DISCO_KAFKA_BOOTSTRAP": bootstrap,
        "DISCO_TOPIC_PREFIX": prefix,
        "DISCO_LOG_JSON": "true",
        **STACK_BUS_ENV,
        # POST /v1/publish?wait=: nobody answers the fuzzer's requests, so keep it short.
        "DISCO_GATEWAY_PUBLISH_MAX_WAIT_SECONDS": "0.5",
    }
    upstream = [name for name in SERVICES if name != "gateway"]
    services: dict[str, ServiceProcess] = {}
    try:
        services.update(start_services(upstream, env, folder))
        if "gateway" in names:
            links = {_UPSTREAMS[name]: services[name].url for name in upstream}
            services.update(start_services(["gateway"], {**env, **links}, folder))
        yield services
    finally:
        stop_services(services.values())


def fuzz_service(service: ServiceProcess, bounds: Bounds, reports: Path = REPORTS) -> ServiceResult:
    """Run schemathesis on one running service; its JUnit report goes to ``reports``."""
    token = mint_dev_token(DEV_AUTH_SECRET, "fuzz", "fuzzer", (Role.USER, Role.ADMIN))
    began = time.monotonic()
    print(f"== fuzzing {service.name} ({service.url})", flush=True)
    reports.mkdir(parents=True, exist_ok=True)
    report = reports / f"{service.name}.xml"
    report.unlink(missing_ok=True)
    code = _schemathesis(service.url, token, bounds, report)
    failures, errors = _findings(report)
    return ServiceResult(
        service.name,
        code,
        time.monotonic() - began,
        failures,
        errors,
        _log_errors(service),
    )


def fuzz(
    admin_url: str,
    bootstrap: str,
    folder: Path,
    *,
    names: Sequence[str] = SERVICES,
    bounds: Bounds | None = None,
) -> list[ServiceResult]:
    """Fuzz ``names`` on a database of their own (at ``admin_url``'s server) and ``bootstrap``."""
    with fuzz_stack(admin_url, bootstrap, folder, names=names) as services:
        return [fuzz_service(services[name], bounds or Bounds()) for name in names]


def summary(results: Sequence[ServiceResult]) -> str:
    lines = []
    for result in results:
        lines.append(
            f"{result.service}: {len(result.failures)} failed checks, "
            f"{len(result.errors)} schemathesis errors, {len(result.log_errors)} error logs, "
            f"exit {result.exit_code}, {result.seconds:.0f}s"
        )
        lines.extend(f"  failure {line}" for line in result.failures)
        lines.extend(f"  error   {line}" for line in result.errors)
        lines.extend(f"  log     {line}" for line in result.log_errors[:20])
    return "\n".join(lines)


@contextmanager
def _infrastructure(folder: Path) -> Iterator[tuple[str, str]]:
    """(admin URL, bootstrap): the configured ones, else embedded ones on free ports."""
    server: EmbeddedPostgres | None = None
    broker: EmbeddedBroker | None = None
    try:
        admin = os.environ.get("DISCO_DATABASE_ADMIN_URL")
        if admin is None:
            server = EmbeddedPostgres(
                data_dir=folder / "pg",
                port=free_port(),
                log_path=folder / "postgres.log",
                durable=False,
            )
            server.start()
            admin = server.dsn("postgres")
        bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
        if bootstrap is None:
            broker = EmbeddedBroker(port=free_port(), log_path=folder / "broker.log")
            broker.start()
            bootstrap = broker.bootstrap
        yield admin, bootstrap
    finally:
        if broker is not None:
            broker.stop()
        if server is not None:
            server.destroy()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=Bounds.max_examples)
    parser.add_argument("--max-seconds", type=int, default=Bounds.max_seconds, help="per service")
    parser.add_argument("--phases", default=Bounds.phases)
    parser.add_argument("--service", action="append", choices=SERVICES)
    parser.add_argument("--seed", type=int, default=Bounds.seed, help="another explores more")
    args = parser.parse_args()
    bounds = Bounds(args.max_examples, args.max_seconds, args.phases, args.seed)
    with (
        tempfile.TemporaryDirectory(prefix="disco-fuzz-") as scratch,
        _infrastructure(Path(scratch)) as (admin, bootstrap),
    ):
        results = fuzz(
            admin, bootstrap, Path(scratch), names=tuple(args.service or SERVICES), bounds=bounds
        )
    print(summary(results))
    if all(result.clean for result in results):
        print("fuzz: no server error, every response as declared")
        return 0
    print("fuzz: findings (above; reproducers in .schemathesis/, reports in fuzz-reports/)")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
