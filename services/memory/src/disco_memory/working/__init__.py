"""Working memory: plan-scoped key/value with TTL and optimistic concurrency."""
