"""The LocalCluster the evaluate flow starts runs workers that do not poll while tasks wait on the model
(issue 33): no statistical profiler, a slow system monitor, and the rest of Dask's config untouched."""
from __future__ import annotations

import time

import dask
import pytest
from distributed import Client, LocalCluster, get_worker

from perseval_flows.runtime import task_runner
from perseval.experiment.config import DaskSettings


def _wait_on_model(seconds: float) -> dict:
    """What a run shard does most of the time: wait on an HTTP answer (here: sleep), then report its worker."""
    time.sleep(seconds)
    get_worker()  # in a worker process, with the config its nanny gave it
    return {"monitor": dask.config.get("distributed.admin.system-monitor.interval"),
            "memory_target": dask.config.get("distributed.worker.memory.target"),
            "comm_timeout": dask.config.get("distributed.comm.timeouts.connect")}


def _profile_samples(cluster_kwargs: dict) -> tuple[int, dict]:
    with LocalCluster(**cluster_kwargs) as cluster, Client(cluster) as client:
        seen = client.submit(_wait_on_model, 0.8, pure=False).result()
        time.sleep(1.2)  # a profile cycle (1 s) closes, so the samples of the task are in the worker's record
        return client.profile()["count"], seen


@pytest.mark.parametrize("quiet", [True, False], ids=["shipped", "dask-default"])
def test_the_flow_s_cluster_does_not_profile_its_workers(quiet: bool) -> None:
    kwargs = dict(task_runner(DaskSettings(n_workers=1, threads_per_worker=1, in_process=False)).cluster_kwargs)
    if not quiet:  # the control: the same cluster with Dask's own worker config samples the waiting task
        kwargs.pop("config")
    samples, seen = _profile_samples(kwargs)
    if quiet:
        assert samples == 0 and seen["monitor"] == "5s"
    else:
        assert samples > 20  # every 10 ms for 0.8 s
    # the override is merged key by key: the rest of the workers' config is Dask's own
    assert seen["memory_target"] == dask.config.get("distributed.worker.memory.target")
    assert seen["comm_timeout"] == dask.config.get("distributed.comm.timeouts.connect")
