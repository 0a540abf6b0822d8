"""The flow a scheduled deployment runs: the evaluate flow with the experiment's own task runner."""
from __future__ import annotations

from typing import Any

from prefect import flow

from perseval_flows.env import apply_offline_env
from perseval_flows.runtime import run_experiment


@flow(name="perseval-scheduled-evaluate")
def scheduled_evaluate(config_path: str, sample: int | None = None) -> dict[str, Any]:
    """`sample`: run every benchmark of the file on this many instances instead of its own `sample`."""
    apply_offline_env()
    return run_experiment(config_path, show_progress=False, sample=sample)
