"""Alembic environment of the memory service (schema `memory`). Run with `disco db upgrade`."""

from disco._dev.alembic_env import run

run()
