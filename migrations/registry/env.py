"""Alembic environment of the registry service (schema `registry`). Run with `disco db upgrade`."""

from disco._dev.alembic_env import run

run()
