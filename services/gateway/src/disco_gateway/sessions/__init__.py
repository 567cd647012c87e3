"""sessions: live UI streams of agent sessions (websocket), their replay, approvals, answers."""
