"""The cheap speed-ups: the embedded server on all cores (a serving choice that keys nothing), and a re-run
with every output done starting no Dask cluster (and, as before, no model server)."""
from __future__ import annotations

import os
from pathlib import Path

from prefect.task_runners import ThreadPoolTaskRunner
from prefect_dask import DaskTaskRunner

from flows.runtime import choose_runner
from perseval.config import DeploymentConfig, ModelConfig, load_experiment
from perseval.freshness import nothing_pending
from perseval.llm.deployments import embedded_command
from perseval.plan import make_plan
from perseval.store import StageStore

from .conftest import CONFIGS
from .test_freshness import _finish

MODEL = ModelConfig(name="tiny", format="gguf", source="x.gguf", deployment="d")


def _flag(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_embedded_server_gets_every_core_unless_the_deployment_says_otherwise():
    dep = DeploymentConfig(name="d", kind="embedded")
    cmd = embedded_command(MODEL, dep, Path("x.gguf"), 8000)
    assert _flag(cmd, "--n_threads") == _flag(cmd, "--n_threads_batch") == str(os.cpu_count())
    cmd = embedded_command(MODEL, dep.model_copy(update={"n_threads": 3}), Path("x.gguf"), 8000)
    assert _flag(cmd, "--n_threads") == _flag(cmd, "--n_threads_batch") == "3"


def test_threads_enter_no_key():
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    keys = [u.key for u in make_plan(exp).runs()] + [u.key for u in make_plan(exp).judgings()]
    for dep in exp.deployments.values():
        dep.n_threads = 1
    assert [u.key for u in make_plan(exp).runs()] + [u.key for u in make_plan(exp).judgings()] == keys


def _done_inputs(root: str, plan) -> None:
    """Data, documents and indexes as complete outputs of one instance each."""
    for unit in plan.data:
        for stage in ("data", "documents"):
            StageStore(root, stage, unit.key).mark_complete({"n_instances": 1})
    for unit in plan.index:
        StageStore(root, "index", unit.key).mark_complete({})


def test_a_rerun_with_every_output_done_starts_no_cluster(tmp_path):
    root = str(tmp_path)
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    plan = make_plan(exp)
    _done_inputs(root, plan)
    assert not nothing_pending(root, plan, exp.experiment.shard_size)
    assert isinstance(choose_runner(exp, root, plan, None, None), DaskTaskRunner)
    _finish(root, plan)
    assert nothing_pending(root, plan, exp.experiment.shard_size)
    assert isinstance(choose_runner(exp, root, plan, None, None), ThreadPoolTaskRunner)
    assert isinstance(choose_runner(exp, root, plan, None, "construct"), DaskTaskRunner)  # construct: as asked

    judged = plan.judgings()[0]
    StageStore(root, "judge", judged.key).part_path(0).unlink()  # one judge shard to redo: Dask again
    assert not nothing_pending(root, plan, exp.experiment.shard_size)
    assert isinstance(choose_runner(exp, root, plan, None, None), DaskTaskRunner)


def test_missing_data_is_work_to_do(tmp_path):
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    plan = make_plan(exp)
    assert not nothing_pending(str(tmp_path), plan, exp.experiment.shard_size)
