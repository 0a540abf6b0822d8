"""README's promise, tested: a benchmark, an agent, a judge and a retriever are each one module plus one
YAML, registered, with no edit to perseval/, tasks/ or flows/. The plugin lives in tests/plugins/."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from perseval.kernel import registry
from perseval.experiment.load import load_experiment
from perseval.core.errors import ConfigError
from perseval.pipeline.plan import make_plan
from perseval.core.instances import InstanceScore
from perseval.pipeline.stages import Runtime, construct, index, judge, run_shard, score
from perseval.core.store import StageStore
from .conftest import PLUGIN, write_configs, copy_configs

def test_a_plugin_adds_all_four_kinds_and_runs_through_the_stages(tmp_path):
    exp = load_experiment(write_configs(tmp_path))
    assert exp.plugins == (str(PLUGIN),)
    assert "tiny" in registry.BENCHMARKS.names() and "tiny.lookup" in registry.AGENTS.names()
    assert "tiny.exact" in registry.JUDGES.names() and "tiny.overlap" in registry.RETRIEVERS.names()
    plan = make_plan(exp)
    (cell,) = plan.cells
    assert cell.name == "tiny/tiny-lookup/-/tiny-overlap/tiny.exact"  # the rule judge applied by default
    rt = Runtime(str(tmp_path / "runs"), "r", str(tmp_path / "cache.sqlite"), 3, exp.plugins)
    assert construct(plan.data[0], rt).n_instances == 7
    index(plan.index[0], rt)
    for shard in range(3):
        run_shard(cell.run, shard, rt)
        judge(cell.judged, shard, rt)
    out = score(cell, rt)
    assert out["headline_metric"] == "accuracy" and out["table"][-1]["accuracy"] == 100.0
    assert len(StageStore(rt.root, "score", cell.key).read_records(InstanceScore)) == 7


def test_plugin_errors_name_the_plugin(tmp_path):
    with pytest.raises(ConfigError, match="no file at"):
        load_experiment(write_configs(tmp_path / "a", "missing_plugin.py"))
    with pytest.raises(ConfigError, match="no_such_module"):
        load_experiment(write_configs(tmp_path / "b", "no_such_module"))
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match="boom"):
        load_experiment(write_configs(tmp_path / "c", str(broken)))


def test_relative_plugin_paths_resolve_from_the_experiment_file(tmp_path):
    (tmp_path / "configs" / "experiments").mkdir(parents=True)
    (tmp_path / "plug.py").write_text("")
    got = registry.resolve_plugins(["../../plug.py", "some.module"], tmp_path / "configs" / "experiments")
    assert got == (str((tmp_path / "plug.py").resolve()), "some.module")


def test_an_installed_package_adds_components_through_its_entry_point(tmp_path, monkeypatch):
    dist = tmp_path / "fakeplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[perseval.plugins]\nfake = fakeplug_judges\n")
    (tmp_path / "fakeplug_judges.py").write_text(
        "from perseval.judges.base import Judge\nfrom perseval.kernel.registry import register_judge\n\n"
        "@register_judge('fake.entrypoint')\nclass FakeJudge(Judge):\n"
        "    benchmark = 'apeb'\n    item = 'fake'\n    metrics = ('fake',)\n    uses_llm = False\n"
        "    async def judge(self, instance, output, binding):\n        return []\n"
        "    def score(self, instance, output, judgments):\n        return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.load_entry_points()
    assert registry.judge_class("fake.entrypoint").__name__ == "FakeJudge"


@pytest.mark.integration
def test_perseval_run_runs_the_plugin_on_prefect_and_dask(tmp_path, prefect_api):
    path = write_configs(tmp_path)
    summary = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", str(path), "--quiet", "--summary-json",
                           str(summary)], cwd=tmp_path, env=dict(os.environ, PREFECT_API_URL=prefect_api),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = json.loads(summary.read_text())["headline"]
    assert (row["benchmark"], row["agent"], row["judge"], row["metric"], row["score"], row["n"]) == \
        ("tiny", "tiny-lookup", "tiny.exact", "accuracy", 100.0, 7)


def test_a_new_judge_on_an_existing_benchmark_is_one_module_and_one_yaml(tmp_path):
    """An APeB rubric-style judge beside the ranking rule: its own cell, its own metric, under its own name."""
    import shutil

    from .conftest import CONFIGS

    root = tmp_path / "configs"
    copy_configs(root)
    (root / "judges" / "intent.yaml").write_text(yaml.safe_dump({"name": "intent", "kind": "apeb.intent-match"}))
    exp_path = root / "experiments" / "quickstart.yaml"
    exp = yaml.safe_load(exp_path.read_text())
    exp.update(plugins=[str(Path(__file__).parent / "plugins" / "apeb_intent_judge.py")],
               judges=["intent"], benchmarks=[{"name": "apeb", "sample": 3, "agents": ["apeb-oracle"]}])
    exp_path.write_text(yaml.safe_dump(exp))
    loaded = load_experiment(exp_path)
    plan = make_plan(loaded)
    assert sorted(c.judge for c in plan.cells) == ["apeb.ranking", "intent"]  # the rule judge still applies
    rt = Runtime(str(tmp_path / "runs"), "r", str(tmp_path / "c.sqlite"), 8, loaded.plugins)
    construct(plan.data[0], rt)
    run = plan.runs()[0]
    run_shard(run, 0, rt)
    for cell in plan.cells:
        judge(cell.judged, 0, rt)
    results = {c.judge: score(c, rt) for c in plan.cells}
    assert results["intent"]["headline_metric"] == "intent_match" and results["intent"]["metrics"] == ["intent_match"]
    assert results["intent"]["table"][-1]["intent_match"] == 100.0  # the oracle ranks the purchase, in category
    assert results["apeb.ranking"]["headline_metric"] == "hit@1"
