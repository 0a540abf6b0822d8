"""Renderers of the run record (perseval.report.record): every table, line and file a person reads of a run
prints what the record holds and computes nothing."""
