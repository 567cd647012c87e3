"""Step records: the journal of each handler's steps (``disco.step``), per consumer group."""
