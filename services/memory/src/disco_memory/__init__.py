"""disco_memory."""
