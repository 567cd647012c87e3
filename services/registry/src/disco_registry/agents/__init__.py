"""Agents: registration, liveness (heartbeats), listing and deregistration (``/v1/agents``)."""
