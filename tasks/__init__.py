"""Prefect tasks that wrap perseval's library calls (installed as perseval_tasks)."""
