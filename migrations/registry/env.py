"""Alembic environment of the registry service (schema `registry`). Run with `disco db upgrade`."""

from disco_service.migration_env import run

run()
