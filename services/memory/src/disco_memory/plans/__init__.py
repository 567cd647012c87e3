"""Plans: records of the plans Planners run, by status, session and parent."""
