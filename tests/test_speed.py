"""What a re-run with every output done starts: no model server (perseval.pipeline.freshness) and no Dask cluster.
(The embedded server's cores, slots and concurrency, and that they key nothing: tests/test_embedded_servers.py.)"""
from __future__ import annotations

import psutil

from flows.runtime import task_runner
from perseval.setup.config import DaskSettings


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_the_dask_cluster_starts_on_the_first_submitted_task_not_with_the_flow():
    """The flow enters its task runner at the start; a re-run that submits nothing must not pay for workers."""
    before = _children()
    with task_runner(DaskSettings(n_workers=1)) as runner:
        assert _children() - before == set()  # entered, as the flow does: no scheduler, no worker yet
        runner.client  # what the first submit does
        assert _children() - before  # now a worker process runs
