"""Procedural memory: how-tos (name, trigger situation, steps), found by relevance."""
