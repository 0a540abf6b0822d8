"""`perseval compare --between` on the quickstart's own outputs (issue 32): the quickstart's IBA cells of
iba-rag and iba-no-history, run for real on the embedded model and judged by the quickstart's judge, the same
units (keys) `make demo` computes (iba-oracle and the judge probes are left out to keep the test short). Every
instance whose slot scores differ is listed with both scores and both trace ids, the quickstart's iba-0001
among them (33.3 vs 66.7 in `make demo`)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from perseval.core.instances import InstanceScore
from perseval.core.store import StageStore
from perseval.pipeline.plan import make_plan
from perseval.experiment.load import load_experiment

from .conftest import CONFIGS, shipped_configs

pytestmark = pytest.mark.integration
AGENTS = ("iba-rag", "iba-no-history")


def _slot_cells(plan):
    return {c.agent: c for c in plan.cells if c.benchmark == "iba" and c.judge == "iba.slots" and c.agent in AGENTS
            and c.run.control is None}


def test_between_lists_the_quickstart_instances_that_differ_with_both_scores_and_traces(prefect_api, tmp_path):
    cfg = shipped_configs(tmp_path)
    quick = yaml.safe_load((CONFIGS / "experiments" / "quickstart.yaml").read_text())
    iba = next(b for b in quick["benchmarks"] if b["name"] == "iba")
    quick |= {"benchmarks": [{**iba, "agents": list(AGENTS)}], "judge_probes": 0}
    (cfg / "experiments" / "quickstart-iba.yaml").write_text(yaml.safe_dump(quick))
    env = dict(os.environ, PREFECT_API_URL=prefect_api)
    run = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/quickstart-iba.yaml",
                          "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ours = _slot_cells(make_plan(load_experiment(cfg / "experiments" / "quickstart-iba.yaml")))
    shipped = _slot_cells(make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml")))
    assert {a: c.key for a, c in ours.items()} == {a: c.key for a, c in shipped.items()}  # the quickstart's units

    shown = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "compare", "perseval-quickstart", "--between",
                            *AGENTS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    assert "Downloading artifacts" not in shown.stdout + shown.stderr
    root = tmp_path / "runs"
    a, b = ({s.instance_id: s.value for s in StageStore(root, "score", ours[agent].key).read_records(InstanceScore)
             if s.metric == "score"} for agent in AGENTS)
    differ = sorted(i for i in set(a) & set(b) if a[i] is not None and b[i] is not None and a[i] != b[i])
    assert differ, (a, b)  # the quickstart's iba-rag and iba-no-history differ on some instance
    lines = shown.stdout.splitlines()
    for iid in differ:  # its row in the slot judge's pair (the LLM judge's pair lists it too, as not judged)
        rows = [ln for ln in lines if ln.split()[:1] == [iid]]
        line = next((ln for ln in rows if f"{a[iid]:.1f}" in ln and f"{b[iid]:.1f}" in ln), "")
        assert line, rows
        assert len([w for w in line.split() if w.startswith("tr-")]) == 2, line  # a trace id for each side
    assert any(i.startswith("iba-0001-") for i in differ), differ  # as `make demo` shows it
