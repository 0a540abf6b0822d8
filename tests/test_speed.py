"""What a re-run with every output done starts: no model server (perseval.pipeline.freshness) and no Dask cluster.
(The embedded server's cores, slots and concurrency, and that they key nothing: tests/test_embedded_servers.py.)"""
from __future__ import annotations

import psutil

from perseval_flows.runtime import task_runner
from perseval.experiment.config import DaskSettings


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_the_dask_cluster_starts_on_the_first_submitted_task_not_with_the_flow():
    """The flow enters its task runner at the start; a re-run that submits nothing must not pay for workers."""
    before = _children()
    with task_runner(DaskSettings(n_workers=1, in_process=False)) as runner:  # a LocalCluster, as on more cores
        assert _children() - before == set()  # entered, as the flow does: no scheduler, no worker yet
        runner.client  # what the first submit does
        assert _children() - before  # now a worker process runs


def test_a_local_prefect_server_starts_while_the_flow_imports_and_is_waited_for_before_use(tmp_path, monkeypatch):
    """`perseval run` with no PREFECT_API_URL: prefect_api yields the local server's URL once its process is
    started, not once it answers (the flow's imports run meanwhile); wait_ready then returns only when it
    answers, and the server is stopped after."""
    import httpx

    from perseval_flows import prefect_server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    before = _children()  # what other tests' session servers run meanwhile is not this server's
    with prefect_server.prefect_api(tmp_path / "logs") as api:
        assert prefect_server._PENDING  # the wait is left to the flow's entry
        prefect_server.wait_ready()
        assert not prefect_server._PENDING
        assert httpx.get(api + "/health", timeout=10).status_code == 200
        server = _children() - before
        assert server  # the server's processes, started here
    assert "PREFECT_API_URL" not in __import__("os").environ
    assert not server & _children()
