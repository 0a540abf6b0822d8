"""The MLflow sink: the track stage (the record built and logged), the parent and child runs, traces, the
per-sample log, and runs read back for the views."""
