"""Alembic environment of the gateway service (schema `gateway`). Run with `disco db upgrade`."""

from disco._dev.alembic_env import run

run()
