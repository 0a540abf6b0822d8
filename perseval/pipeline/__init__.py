"""Running a plan: units of work, their keys and freshness, the stages, controls and cost accounting."""
