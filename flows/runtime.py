"""Running the evaluate flow with the task runner an experiment file asks for."""
from __future__ import annotations

from typing import Any

from prefect_dask import DaskTaskRunner

from perseval.config import DaskSettings, load_experiment


def task_runner(settings: DaskSettings, address: str | None = None) -> DaskTaskRunner:
    """A DaskTaskRunner on an existing scheduler, or on a LocalCluster of worker processes."""
    addr = address or settings.address
    if addr:
        return DaskTaskRunner(address=addr)
    return DaskTaskRunner(cluster_kwargs={"n_workers": settings.n_workers,
                                          "threads_per_worker": settings.threads_per_worker,
                                          "processes": True, "dashboard_address": None})


def run_experiment(config_path: str, *, output_root: str | None = None, dask_address: str | None = None,
                   show_progress: bool = True, stop_after: str | None = None,
                   sample: int | None = None) -> dict[str, Any]:
    from flows.evaluate import evaluate

    exp = load_experiment(config_path)
    runner = task_runner(exp.experiment.dask, dask_address)
    return evaluate.with_options(task_runner=runner)(config_path=config_path, output_root=output_root,
                                                      stop_after=stop_after, sample=sample,
                                                      show_progress=show_progress)
