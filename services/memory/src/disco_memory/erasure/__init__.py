"""Erasure: everything of one user, or of one tenant, in one transaction."""
