"""Agent-state snapshots: the latest full and slim state of each agent in a session."""
