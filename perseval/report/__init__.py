"""Reading results: headline rows, gains, probes, comparisons, judge checks, MLflow tracking and traces."""
