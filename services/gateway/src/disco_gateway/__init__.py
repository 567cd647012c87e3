"""disco_gateway."""
