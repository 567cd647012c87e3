"""Episodic memory: conversation turns per session and agent; recent and search."""
