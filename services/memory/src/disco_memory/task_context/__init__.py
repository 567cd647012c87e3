"""Task context: a Worker's saved TaskContext, found again by task id or sub-task id."""
