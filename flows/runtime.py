"""Running the evaluate flow with the task runner an experiment file asks for.

Each run's flow run carries an owner tag (host, PID and start time of the perseval
process). Before a run starts, flow runs of this host that are still RUNNING although
their owner process is gone (kill -9, a crash, a reboot) are marked Crashed, with their
unfinished task runs, so the Prefect UI does not show abandoned runs as live.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from prefect_dask import DaskTaskRunner  # first: imported after other prefect modules, Dask's log config is lost
from prefect import tags
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterId, FlowRunFilterState,
                                            FlowRunFilterStateType, TaskRunFilter, TaskRunFilterState,
                                            TaskRunFilterStateType)
from prefect.client.schemas.objects import StateType
from prefect.logging.handlers import APILogWorker
from prefect.states import Crashed

from perseval.experiment.config import DaskSettings, ResolvedExperiment
from perseval.experiment.load import load_experiment
from perseval.llm.embedded import HOST
from perseval.core.owner import OWNER_TAG, owner_gone, owner_tag
from perseval_flows.prefect_server import wait_ready

log = logging.getLogger("perseval.runtime")
UNFINISHED = [StateType.RUNNING, StateType.PENDING, StateType.SCHEDULED]
# The Dask config of the LocalCluster's worker processes (issue 33). A worker's statistical profiler samples
# every thread's stack every 10 ms and its system monitor polls every 0.5 s, for a dashboard this cluster does
# not open; while every task waits on the model server that polling was most of the workers' CPU (measured:
# 9.2% of a core for two idle workers, 4.1% without it), taken from the server on a small machine. The
# nanny's memory limit keeps its own, faster monitor. Dotted keys: the nanny merges them shallowly over this
# process's whole config and the worker sets them in order, so a nested {"distributed": ...} would replace it.
QUIET_WORKERS = {"distributed.worker.profile.enabled": False, "distributed.admin.system-monitor.interval": "5s"}


def in_process(settings: DaskSettings) -> bool:
    """Whether the tasks run on threads of this process: as the file says, or, unset, where the machine has no
    core for each worker process besides this one and a model server's. There the workers only took CPU and
    memory: on 2 cores a cold quickstart took 357 s on a LocalCluster and 323 s in process, and 2,000 LaMP
    instances against an instant server peaked at 1.8 GB with the cluster, 1.0 GB in process, with 40 s less
    spent outside the stages (the cluster's start and shutdown; docs/guides/performance.md)."""
    if settings.in_process is not None:
        return settings.in_process
    return (os.cpu_count() or 1) < settings.n_workers + 2


def task_runner(settings: DaskSettings, address: str | None = None) -> TaskRunner:
    """A DaskTaskRunner on an existing scheduler, or on a LocalCluster of worker processes; or, in process
    (`in_process`, and no scheduler address given), threads of this process: as many as the cluster would run
    tasks at once, with no worker process, nanny or scheduler beside the model server.

    The LocalCluster listens on the loopback interface only and has no dashboard. A Dask scheduler always
    opens an HTTP port (health and metrics), by default 8787 whatever the dashboard setting; it gets a free
    loopback port instead. Its workers run with QUIET_WORKERS: no profiler, a slow system monitor."""
    addr = address or settings.address
    if addr:
        return DaskTaskRunner(address=addr)
    if in_process(settings):
        return ThreadPoolTaskRunner(max_workers=settings.n_workers * settings.threads_per_worker)
    return DaskTaskRunner(cluster_kwargs={"n_workers": settings.n_workers, "host": HOST,
                                          "threads_per_worker": settings.threads_per_worker,
                                          "processes": True, "dashboard_address": f"{HOST}:0",
                                          "scheduler_kwargs": {"dashboard": False}, "config": QUIET_WORKERS})


def mark_stale_runs() -> list[str]:
    """Mark RUNNING flow runs whose owner process is gone as Crashed, with their unfinished task runs.
    Returns the ids of the flow runs marked."""
    marked = []
    with get_client(sync_client=True) as client:
        running = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING]))), limit=200)
        for fr in running:
            tag = next((t for t in fr.tags if t.startswith(OWNER_TAG + ":")), None)
            if tag is None or not owner_gone(tag):
                continue
            message = "the perseval process running it is gone (killed or crashed); marked by a later run"
            client.set_flow_run_state(fr.id, Crashed(message=message), force=True)
            tasks = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[fr.id])),
                task_run_filter=TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=UNFINISHED))))
            for tr in tasks:
                client.set_task_run_state(tr.id, Crashed(message=message), force=True)
            marked.append(str(fr.id))
    return marked


def run_experiment(experiment: ResolvedExperiment | str | Path, *, output_root: str | None = None,
                   dask_address: str | None = None, show_progress: bool = True, stop_after: str | None = None,
                   sample: int | None = None) -> dict[str, Any]:
    """Run the evaluate flow on `experiment`: the one `perseval run` resolved (handed on, not loaded again), or a
    config path (a scheduled deployment's parameter), loaded here once. The summary's timings gain `prepare`
    (load, stale-run check) and `flow_start` (the flow run's creation). The Dask cluster is not in either:
    prefect-dask starts it on the first submitted task, inside the first stage that has work, so a re-run with
    nothing to do starts none."""
    from perseval_flows.evaluate import evaluate

    t0 = time.time()
    exp = experiment if isinstance(experiment, ResolvedExperiment) else load_experiment(experiment)
    wait_ready()  # a local Prefect server `perseval run` started: it came up while this module imported
    try:
        mark_stale_runs()
    except Exception as exc:  # housekeeping: never the reason a run does not start
        log.warning("could not check for stale flow runs: %s", exc)
    runner = task_runner(exp.experiment.dask, dask_address)
    t1 = time.time()
    try:
        with tags(owner_tag()):
            summary = evaluate.with_options(task_runner=runner)(experiment=exp, output_root=output_root,
                                                                stop_after=stop_after, sample=sample,
                                                                show_progress=show_progress)
    finally:
        # send the flow run's last log lines (a failure's among them) while the API is still up: a local
        # Prefect server stops right after, and a flush at exit would print a connection error instead
        APILogWorker.drain_all(timeout=5)
    fixed = {"prepare": round(t1 - t0, 2), "flow_start": round(summary.pop("entered_at") - t1, 2)}
    summary["timings"] = {**fixed, **summary["timings"]}
    summary["window"] = (t0, time.time())  # the caller names what came before and after (perseval run: start, report)
    return summary
