"""Dedup marks: which envelopes a consumer group handled (the bus's durable dedup store)."""
