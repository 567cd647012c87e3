"""``make fuzz``, small: schemathesis over every service's OpenAPI finds nothing.

The same run as ``make fuzz`` (tests/fuzz.py), on the session's broker and
PostgreSQL, with small bounds so that ``make test`` covers it quickly: real
service processes (started once for the module), a valid admin token, and
three checks (no 5xx, every response as its schema declares, every status code
declared). One test per service, so that each stays short; they share the
stack, so they run on one worker (``xdist_group``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.processes import ServiceProcess
from tests.fuzz import SERVICES, Bounds, fuzz_service, fuzz_stack, summary

# Per service: the coverage phase (each parameter's edges and wrong types), then
# property-based examples until the time budget is spent. `make fuzz` keeps the
# larger bounds (tests.fuzz.Bounds' defaults).
BOUNDS = Bounds(max_examples=3, max_seconds=5, phases="coverage,fuzzing")

pytestmark = [pytest.mark.xdist_group("fuzz"), pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def fuzzed_services(
    postgres_admin_url: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, ServiceProcess]]:
    """The four services as processes, on a database of their own."""
    with fuzz_stack(
        postgres_admin_url, kafka_bootstrap, tmp_path_factory.mktemp("fuzz-logs")
    ) as services:
        yield services


@pytest.mark.parametrize("service", SERVICES)
def test_schemathesis_finds_no_server_error_and_no_undeclared_response(
    fuzzed_services: dict[str, ServiceProcess], service: str, tmp_path: Path
) -> None:
    result = fuzz_service(fuzzed_services[service], BOUNDS, reports=tmp_path)
    report = summary([result])
    print(f"\n{report}")
    assert result.failures == [], report
    assert result.errors == [], report
    assert result.exit_code == 0, report
