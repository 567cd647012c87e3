"""Semantic memory: facts stored with their embedding, found by similarity."""
