"""Liveness: the TTL sweeper that expires agents not heard from in time."""
