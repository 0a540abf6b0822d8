"""Reading results: the run record (built once by the track stage from the stage outputs) and what renders it:
analyses/ (the statistics it holds), views/ (every table and file a person reads), sink/ (MLflow)."""
