"""Sessions: conversations grouping plans and turns, with their activity."""
