"""Two `perseval run`s of overlapping experiments at the same time share one stage store and one request
cache: no unit is written twice at once, no request is sent twice, both finish with the same scores."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
import yaml

from .conftest import shipped_configs

pytestmark = pytest.mark.integration


def test_overlapping_runs_share_the_store_without_duplicate_requests(prefect_api, tmp_path):
    cfg = shipped_configs(tmp_path)
    base = {"seed": 11, "shard_size": 2, "output_root": str(tmp_path / "runs"), "backbones": ["smollm2-135m"],
            "retrievers": ["minilm"], "dask": {"n_workers": 1, "threads_per_worker": 1},
            "mlflow": {"experiment": "overlap", "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                       "artifact_root": str(tmp_path / "artifacts")}}
    shared = {"name": "apeb", "sample": 3, "agents": ["apeb-no-history"]}
    for name, extra in (("a", ["apeb-oracle"]), ("b", [])):
        exp = {**base, "name": name, "benchmarks": [{**shared, "agents": shared["agents"] + extra}]}
        (cfg / "experiments" / f"{name}.yaml").write_text(yaml.safe_dump(exp))
    env = dict(os.environ, PREFECT_API_URL=prefect_api)
    procs = {name: subprocess.Popen([sys.executable, "-m", "perseval_flows.cli", "run", f"configs/experiments/{name}.yaml",
                                     "--quiet", "--summary-json", str(tmp_path / f"{name}.json")], cwd=tmp_path,
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in ("a", "b")}
    outs = {name: p.communicate(timeout=1500)[0] for name, p in procs.items()}
    for name, proc in procs.items():  # the MLflow SQLite database is created by whichever finishes first
        assert proc.returncode == 0, f"run {name}:\n" + outs[name][-4000:]
    summaries = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in ("a", "b")}
    score = {n: next(r["score"] for r in s["headline"] if r["agent"] == "apeb-no-history") for n, s in summaries.items()}
    assert score["a"] == score["b"]
    with sqlite3.connect(tmp_path / "runs" / "request-cache.sqlite") as con:
        sent = con.execute("SELECT key, COUNT(*) FROM requests WHERE status = 'ok' GROUP BY key").fetchall()
    assert sent and all(n == 1 for _, n in sent), [k for k, n in sent if n > 1]
    assert summaries["a"]["llm_requests"] + summaries["b"]["llm_requests"] == len(sent)
