"""A2A agent cards built from registrations (``GET /v1/agents/{agent_id}/card``)."""
