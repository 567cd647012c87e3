"""disco_registry."""
