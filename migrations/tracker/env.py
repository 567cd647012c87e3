"""Alembic environment of the tracker service (schema `tracker`). Run with `disco db upgrade`."""

from disco._dev.alembic_env import run

run()
