"""Root conftest: the shared fixtures and the suite's split are plugins every test folder sees."""

pytest_plugins = [
    "tests.fixtures.suite",
    "tests.fixtures.infra",
    "tests.fixtures.memory",
    # Hypothesis' profile for every property test (no deadline).
    "tests.fixtures.properties",
]
