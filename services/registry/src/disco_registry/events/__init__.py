"""The event registry: event definitions owned by the agents that registered them."""
