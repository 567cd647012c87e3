"""Payload schemas: immutable, semver-versioned JSON Schemas (``/v1/schemas``)."""
