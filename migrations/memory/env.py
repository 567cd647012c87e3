"""Alembic environment of the memory service (schema `memory`). Run with `disco db upgrade`."""

from disco_service.migration_env import run

run()
