"""``make fuzz``: schemathesis over every service's OpenAPI, against the real services.

Starts an embedded PostgreSQL and broker on free loopback ports (or uses
``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP``), a fresh database
migrated to head, the four services as processes, and runs ``schemathesis
run`` on each one's ``/openapi.json`` with a valid token (an admin's, so the
admin-only routes are reached too) and a bounded number of examples. Two
checks: no server error (5xx) and every response conforms to its declared
schema (status code, content type, body). Exits non-zero on any finding.

    uv run python -m tests.fuzz [--max-examples N] [--max-seconds S] [--service NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from tests.fixtures.processes import start_services, stop_services

SERVICES = ("registry", "memory", "tracker", "gateway")
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"


def _schemathesis(
    url: str, token: str, *, max_examples: int, max_seconds: int, report: Path
) -> int:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        CHECKS,
        "--max-examples",
        str(max_examples),
        "--max-time",
        str(max_seconds),
        "--phases",
        "examples,coverage,fuzzing",
        "--request-timeout",
        "30",
        "--seed",
        "1",
        "--workers",
        "2",
        "--continue-on-failure",
        "--report",
        "junit",
        "--report-junit-path",
        str(report),
    ]
    return subprocess.run(command, check=False).returncode


async def _provision(settings: BusSettings) -> None:
    async with BusClient(settings) as bus:
        await bus.ensure_topics()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=15)
    parser.add_argument("--max-seconds", type=int, default=60, help="per service")
    parser.add_argument("--service", action="append", choices=SERVICES)
    args = parser.parse_args()
    names = tuple(args.service or SERVICES)
    with tempfile.TemporaryDirectory(prefix="disco-fuzz-") as scratch:
        folder = Path(scratch)
        server: EmbeddedPostgres | None = None
        broker: EmbeddedBroker | None = None
        services = {}
        try:
            admin_root = os.environ.get("DISCO_DATABASE_ADMIN_URL")
            if admin_root is None:
                server = EmbeddedPostgres(
                    data_dir=folder / "pg",
                    port=free_port(),
                    log_path=folder / "postgres.log",
                    durable=False,
                )
                server.start()
                admin_root = server.dsn("postgres")
            bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
            if bootstrap is None:
                broker = EmbeddedBroker(port=free_port(), log_path=folder / "broker.log")
                broker.start()
                bootstrap = broker.bootstrap
            name = f"disco_fuzz_{os.getpid()}"
            if server is not None:
                server.create_database(name)
            admin = with_database(admin_root, name)
            app = with_user(admin, "disco_app", "disco_app")
            upgrade(admin, app)
            prefix = f"fuzz{os.getpid()}."
            asyncio.run(_provision(BusSettings(kafka_bootstrap=bootstrap, topic_prefix=prefix)))
            env = {
                "DISCO_ENV": "dev",
                "DISCO_DATABASE_URL": app,
                "DISCO_KAFKA_BOOTSTRAP": bootstrap,
                "DISCO_TOPIC_PREFIX": prefix,
                "DISCO_LOG_JSON": "true",
            }
            services = start_services(names, env, folder)
            token = mint_dev_token(DEV_AUTH_SECRET, "fuzz", "fuzzer", (Role.USER, Role.ADMIN))
            failed: list[str] = []
            for service_name in names:
                began = time.monotonic()
                print(f"== fuzzing {service_name} ({services[service_name].url})", flush=True)
                code = _schemathesis(
                    services[service_name].url,
                    token,
                    max_examples=args.max_examples,
                    max_seconds=args.max_seconds,
                    report=Path("fuzz-reports") / f"{service_name}.xml",
                )
                print(f"== {service_name}: exit {code} in {time.monotonic() - began:.0f}s")
                if code != 0:
                    failed.append(service_name)
                    print(services[service_name].log_tail(60))
        finally:
            stop_services(services.values())
            if broker is not None:
                broker.stop()
            if server is not None:
                server.destroy()
    if failed:
        print(f"fuzz: findings in {', '.join(failed)}")
        return 1
    print("fuzz: no server error, every response as declared")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
