"""Root conftest: the shared fixtures are a plugin so every test folder sees them."""

pytest_plugins = ["tests.fixtures.infra"]
