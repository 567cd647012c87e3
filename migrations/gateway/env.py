"""Alembic environment of the gateway service (schema `gateway`). Run with `disco db upgrade`."""

from disco_service.migration_env import run

run()
