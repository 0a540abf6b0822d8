"""An experiment is resolved once: every component's params are validated when it is loaded, the plan
carries them typed, and each stage call builds each component it uses once, validating nothing again.
One seed reaches every agent. And the quickstart's keys are the ones its cached outputs were made under."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from perseval.experiment.load import load_experiment
from perseval.kernel.params import Configurable, Params
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput
from perseval.pipeline.stages import Runtime, analyze, construct, index, judge, run_shard, score

from .conftest import CONFIGS, REPO, copy_configs
from .conftest import write_configs

QUICKSTART_KEYS = Path(__file__).parent / "data" / "quickstart_keys.json"


class Counts:
    """Params validations (by params class) and component constructions (by component class)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.validated: Counter[str] = Counter()
        self.built: Counter[str] = Counter()
        validate, init = BaseModel.model_validate.__func__, Configurable.__init__  # type: ignore[attr-defined]

        def counted_validate(cls, obj, *args, **kwargs):
            self.validated[cls.__name__] += 1
            return validate(cls, obj, *args, **kwargs)

        def counted_init(obj, params=None):
            self.built[type(obj).__name__] += 1
            init(obj, params)

        monkeypatch.setattr(Params, "model_validate", classmethod(counted_validate))
        monkeypatch.setattr(Configurable, "__init__", counted_init)

    def take(self) -> tuple[dict[str, int], dict[str, int]]:
        out = dict(self.validated), dict(self.built)
        self.validated.clear()
        self.built.clear()
        return out


def test_each_component_is_validated_at_load_and_built_once_per_stage_call(tmp_path, monkeypatch):
    """The plugin's four kinds through every stage: at load each params model is validated once; a stage
    call builds what it uses once from the unit's validated params (after a pickle round trip, as a Dask
    worker gets it) and validates nothing."""
    path = write_configs(tmp_path)
    counts = Counts(monkeypatch)
    plan = make_plan(load_experiment(path))
    validated, built = counts.take()
    # benchmark TinyParams, retriever OverlapParams, agent and judge NoParams: each validated once
    assert validated == {"TinyParams": 1, "OverlapParams": 1, "NoParams": 2}
    assert built == {"LookupAgent": 1, "OverlapRetriever": 1}  # asked what it needs; checked it builds
    (cell,) = pickle.loads(pickle.dumps(plan)).cells
    rt = Runtime(str(tmp_path / "runs"), "r", str(tmp_path / "cache.sqlite"), 3, (str(REPO / "tests" / "plugins" /
                                                                                       "tiny_plugin.py"),))
    calls = [("construct", lambda: construct(cell.run.data, rt), {"TinyBenchmark": 1}),
             ("index", lambda: index(cell.run.index, rt), {"OverlapRetriever": 1}),
             ("run", lambda: [run_shard(cell.run, s, rt) for s in range(1)], {"LookupAgent": 1, "OverlapRetriever": 1}),
             ("judge", lambda: [judge(cell.judged, s, rt) for s in range(1)], {"ExactJudge": 1})]
    for stage, call, expected in calls:
        counts.take()
        call()
        validated, built = counts.take()
        assert (stage, validated, built) == (stage, {}, expected)
    for s in (1, 2):
        run_shard(cell.run, s, rt)
        judge(cell.judged, s, rt)
    counts.take()
    assert score(cell, rt)["table"][-1]["accuracy"] == 100.0
    assert counts.take() == ({}, {"ExactJudge": 1, "TinyBenchmark": 1})
    analyze(plan.analyses[0], rt)
    assert counts.take() == ({}, {"TinyBenchmark": 1})


def test_a_plugins_params_unpickle_in_a_process_that_never_loaded_the_plugin(tmp_path):
    """A Dask worker receives units holding a plugin's validated params: it imports the plugin file to
    restore them (a plugin module is not importable by name)."""
    plan = make_plan(load_experiment(write_configs(tmp_path)))
    blob = tmp_path / "run.pickle"
    blob.write_bytes(pickle.dumps(plan.runs()[0]))
    code = ("import pickle, sys; run = pickle.loads(open(sys.argv[1], 'rb').read()); "
            "p = run.data.params; print(type(p).__module__, p.noise, run.index.params.lowercase)")
    proc = subprocess.run([sys.executable, "-c", code, str(blob)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    module, noise, lowercase = proc.stdout.split()
    assert module.startswith("perseval_plugin_tiny_plugin_") and (noise, lowercase) == ("3", "True")


# --- one seed --------------------------------------------------------------------------------------------------

def _random_experiment(root: Path, seed: int, entry_seed: int | None = None) -> Path:
    cfg = root / "configs"
    copy_configs(cfg)
    entry = {"name": "apeb", "sample": 4, "agents": ["apeb-random"], **({"seed": entry_seed} if entry_seed else {})}
    exp = {"name": "seeded", "seed": seed, "shard_size": 8, "backbones": [], "retrievers": ["minilm"], "judges": [],
           "benchmarks": [entry]}
    (cfg / "experiments" / "seeded.yaml").write_text(yaml.safe_dump(exp))
    return cfg / "experiments" / "seeded.yaml"


def _rankings(plan, data, root: Path) -> dict[str, list[str]]:
    """The random ranker's rankings under `plan`'s run, over the instances of `data` (built once)."""
    run = replace(plan.runs()[0], data=data)
    rt = Runtime(str(root), "r", str(root / "cache.sqlite"), 8)
    construct(data, rt)
    run_shard(run, 0, rt)
    return {o.instance_id: o.parsed["ranking"] for o in rt.store("run", run.key).read_part(0, AgentOutput)}


def test_the_experiment_seed_reaches_the_random_ranker(tmp_path):
    """Two seeds: two rankings of the same instances; the same seed: the same ranking. The seed reaches the
    agent through its run (AgentContext.seed), not through a param of its own."""
    plans = {s: make_plan(load_experiment(_random_experiment(tmp_path / f"s{s}", s))) for s in (1, 2)}
    assert {r.seed for r in plans[1].runs()} == {1} and {j.seed for j in plans[2].judgings()} == {2}
    data = plans[1].data[0]  # both runs over the same instances: only the agent's seed differs
    one, two = _rankings(plans[1], data, tmp_path / "r1"), _rankings(plans[2], data, tmp_path / "r2")
    again = _rankings(plans[1], data, tmp_path / "r1-again")
    assert len(one) == 8 and one == again  # every instance of the shard
    assert one != two and one.keys() == two.keys()
    assert plans[1].runs()[0].key != plans[2].runs()[0].key


def test_a_benchmark_entrys_seed_reaches_its_data_runs_and_judgings(tmp_path):
    plan = make_plan(load_experiment(_random_experiment(tmp_path, 1, entry_seed=9)))
    assert {plan.data[0].seed} | {r.seed for r in plan.runs()} | {j.seed for j in plan.judgings()} == {9}


# --- the quickstart's keys ---------------------------------------------------------------------------------------

def test_the_quickstart_keys_are_the_ones_its_outputs_were_cached_under():
    """Pinned: a change that moves a quickstart key re-runs (and may change) the quickstart's numbers. When a
    stage's output really changes, bump that stage's version in perseval/pipeline/stages.py and update the file."""
    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    got = {"data": {u.entry.name: u.key for u in plan.data},
           "index": {f"{u.data.entry.name}/{u.retriever.name}": u.key for u in plan.index},
           "runs": {f"{r.label}/{r.index.retriever.name if r.index else '-'}": r.key for r in plan.runs()},
           "judgings": {f"{j.run.label}/{j.run.index.retriever.name if j.run.index else '-'}/{j.judge.name}": j.key
                        for j in plan.judgings()},
           "cells": {c.name: c.key for c in plan.cells},
           "analyses": {u.data.entry.name: u.key for u in plan.analyses}}
    assert got == json.loads(QUICKSTART_KEYS.read_text())


# --- one load per command ---------------------------------------------------------------------------------------

class Loads:
    """Calls of load_experiment, wherever a module holds it: the modules that imported it by name at import
    time (perseval_flows.runtime, perseval_flows.evaluate) and the ones that import it lazily from perseval.experiment.load."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        import perseval_flows.cli
        import perseval_flows.evaluate
        import perseval_flows.runtime
        import perseval.experiment.load as experiment

        self.paths: list[str] = []
        real = experiment.load_experiment

        def counted(path, *args, **kwargs):
            self.paths.append(str(path))
            return real(path, *args, **kwargs)

        for module in (experiment, perseval_flows.cli, perseval_flows.runtime, perseval_flows.evaluate):
            if getattr(module, "load_experiment", None) is real:
                monkeypatch.setattr(module, "load_experiment", counted)


@pytest.mark.integration
def test_perseval_run_loads_the_experiment_file_once(tmp_path, monkeypatch, prefect_api):
    """One `perseval run` (the real command, in this process, on a real Prefect API and a one-worker Dask
    LocalCluster): the file is loaded once, before any server starts, and the flow runs what that load
    resolved; and the summary is the run's, so the experiment really went through the flow."""
    from typer.testing import CliRunner

    from perseval_flows.cli import app

    path = write_configs(tmp_path)
    exp = yaml.safe_load(path.read_text())
    exp["dask"] = {"n_workers": 1, "threads_per_worker": 1}  # one worker process is enough to count loads
    path.write_text(yaml.safe_dump(exp))
    loads = Loads(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    saved = dict(os.environ)  # `run` sets its offline and logging variables in the process it runs in
    try:
        result = CliRunner().invoke(app, ["run", str(path), "--quiet", "--summary-json", str(tmp_path / "s.json")])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert result.exit_code == 0, result.output[-3000:]
    assert loads.paths == [str(path)]
    (row,) = json.loads((tmp_path / "s.json").read_text())["headline"]
    assert (row["benchmark"], row["score"], row["n"]) == ("tiny", 100.0, 7)


@pytest.mark.integration
def test_a_scheduled_deployments_config_path_is_loaded_once(tmp_path, monkeypatch, prefect_api):
    """A scheduled deployment hands its flow a config path (a JSON parameter): `run_experiment` loads it once
    and the evaluate flow runs that load, not a second one (here stopped after construct)."""
    from perseval_flows.runtime import run_experiment

    path = write_configs(tmp_path)
    exp = yaml.safe_load(path.read_text())
    exp["dask"] = {"n_workers": 1, "threads_per_worker": 1}
    path.write_text(yaml.safe_dump(exp))
    loads = Loads(monkeypatch)
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    out = run_experiment(str(path), output_root=str(tmp_path / "runs"), stop_after="construct", show_progress=False)
    assert loads.paths == [str(path)]
    (data,) = out["data"].values()
    assert data["n_instances"] == 7
