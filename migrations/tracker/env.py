"""Alembic environment of the tracker service (schema `tracker`). Run with `disco db upgrade`."""

from disco_service.migration_env import run

run()
