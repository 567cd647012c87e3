"""``make fuzz``, small: schemathesis over every service's OpenAPI finds nothing.

The same run as ``make fuzz`` (tests/fuzz.py), on the session's broker and
PostgreSQL, with small bounds so that ``make test`` covers it in a couple of
minutes: real service processes, a valid admin token, and three checks (no
5xx, every response as its schema declares, every status code declared).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz import SERVICES, Bounds, fuzz, summary

# Per service: the coverage phase (each parameter's edges and wrong types), then
# property-based examples until the time budget is spent.
BOUNDS = Bounds(max_examples=3, max_seconds=10, phases="coverage,fuzzing")


@pytest.mark.timeout(600)
def test_schemathesis_finds_no_server_error_and_no_undeclared_response(
    postgres_admin_url: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    results = fuzz(postgres_admin_url, kafka_bootstrap, tmp_path, bounds=BOUNDS)
    report = summary(results)
    print(f"\n{report}")
    assert [result.service for result in results] == list(SERVICES)
    for result in results:
        assert result.failures == [], report
        assert result.errors == [], report
        assert result.exit_code == 0, report
