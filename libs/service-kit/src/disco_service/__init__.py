"""disco_service."""
