"""Plan context: a Planner's saved PlanContext, found again by plan id or correlation id."""
