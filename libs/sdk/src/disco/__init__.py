"""disco."""
