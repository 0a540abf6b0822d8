"""A small quickstart-like IBA run for the MLflow trace tests, made without the embedded LLM: the real stage
functions (construct, bm25 index, run, judge, score) write their real Parquet records, with an
OpenAI-compatible stand-in on 127.0.0.1 as backbone and judge; then `report.track` logs it as `perseval run`
does. The stand-in's judge gives every verdict a reason and leaves every fourth checkpoint unreadable
(unscored, with its raw text), so assessments carry rationales and errors."""
from __future__ import annotations

import hashlib
import json
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import yaml

from perseval.experiment.config import ResolvedExperiment
from perseval.experiment.load import load_experiment
from perseval.pipeline.cost import UnitRecords, plan_cost
from perseval.llm.endpoint import Endpoint
from perseval.llm.identity import identity_label
from perseval.pipeline.plan import make_plan
from perseval.pipeline.probes import probe, probe_units
from perseval.pipeline.units import Plan, shards
from perseval.report.sink.track import track
from perseval.pipeline.stages import Runtime, construct, index, judge, run_shard, score, score_summary
from perseval.core.store import StageStore
from tests.http_stub import JsonHandler, completion, serve

from .conftest import CONFIGS, copy_configs

MODEL = "stub-api"
EXPERIMENT = {
    "name": "traces-demo", "seed": 7, "shard_size": 2, "backbones": [MODEL], "retrievers": ["bm25"],
    "judges": ["stub-judge"],
    "benchmarks": [{"name": "iba", "sample": 4, "params": {"noise_per_evidence": 3},
                    "agents": ["iba-rag", "iba-no-history", "iba-agent", "iba-oracle"], "baseline": "iba-no-history"}],
    "mlflow": {"experiment": "perseval-traces-demo"},
}
UNREADABLE = "I cannot decide"  # what the stand-in judge answers to every fourth checkpoint


def verdict(messages: list[dict[str, Any]]) -> str:
    """A judge answer fixed by the request text: met or not with a reason, or (one in four) unreadable."""
    digest = int(hashlib.sha256(json.dumps(messages).encode()).hexdigest(), 16)
    if digest % 4 == 0:
        return UNREADABLE
    met = digest % 4 != 1
    reason = ("the answer follows the preference the history shows" if met else
              "the answer ignores the preference the history shows")
    return json.dumps({"verdict": met, "reason": reason})


class Handler(JsonHandler):
    def do_POST(self) -> None:
        body = self.request_json()
        schema = json.dumps(body.get("response_format") or {})
        if '"verdict"' in schema:
            text = verdict(body["messages"])
        elif body.get("response_format"):
            text = "{}"
        else:  # an answer that depends on the prompt (the history it quotes), so the agents' verdicts differ
            digest = int(hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest(), 16)
            text = f"A plan that keeps to the habits you showed before: short steps, mornings first ({digest % 97})."
        self.reply(200, completion(text))


@contextmanager
def stub_llm() -> Iterator[str]:
    with serve(Handler) as url:
        yield f"{url}/v1"


def write_configs(root: Path, experiment: dict[str, Any] | None = None) -> Path:
    """The shipped configs, the stand-in model behind an `openai` endpoint, its judge, and the experiment."""
    cfg = root / "configs"
    copy_configs(cfg)
    (cfg / "models" / f"{MODEL}.yaml").write_text(yaml.safe_dump(
        {"name": MODEL, "format": "api", "source": "stub", "deployment": "stub-endpoint",
         "sampling": {"temperature": 0.0, "max_tokens": 64}}))
    (cfg / "deployments" / "stub-endpoint.yaml").write_text(yaml.safe_dump(
        {"name": "stub-endpoint", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "retries": 0}))
    (cfg / "judges" / "stub-judge.yaml").write_text(yaml.safe_dump({"name": "stub-judge", "model": MODEL}))
    path = cfg / "experiments" / "traces.yaml"
    path.write_text(yaml.safe_dump(experiment or EXPERIMENT))
    return path


def compute(exp: ResolvedExperiment, plan: Plan, root: str, url: str) -> Runtime:
    """Every stage up to score, with the real stage functions, on the stand-in."""
    endpoint = Endpoint(MODEL, "openai", url, "stub", identity_label(exp.models[MODEL]), None, 4, 10.0, 0)
    rt = Runtime(root, "trace-test", str(Path(root) / "cache.sqlite"), exp.experiment.shard_size,
                 endpoints={MODEL: endpoint})
    for unit in plan.data:
        construct(unit, rt)
    for unit in plan.index:
        index(unit, rt)
    n = {u.key: rt.store("data", u.key).manifest()["n_instances"] for u in plan.data}
    for run in plan.runs():
        for s in shards(n[run.data.key], rt.shard_size):
            run_shard(run, s, rt)
    for unit in plan.judgings():
        for s in shards(n[unit.run.data.key], rt.shard_size):
            judge(unit, s, rt)
    for unit in probe_units(plan):  # judge_probes: each LLM judge on answers of known verdict
        probe(unit, rt)
    for cell in plan.cells:
        score(cell, rt)
    return rt


def track_run(exp: ResolvedExperiment, plan: Plan, root: str, base: Path) -> str:
    """The track stage as the evaluate flow calls it (no analysis files); returns the parent run id."""
    n = {u.key: StageStore(root, "data", u.key).manifest()["n_instances"] for u in plan.data}
    scores = {c.key: score_summary(root, c) for c in plan.cells}
    costs = plan_cost(exp, plan, UnitRecords(root, {k: shards(v, exp.experiment.shard_size) for k, v in n.items()}),
                      "trace-test")
    return track(exp, plan, root, scores, {u.key: {"files": []} for u in plan.analyses}, {}, costs, base,
                 str(Path(root) / "cache.sqlite")).run_id


def make_run(workdir: Path, experiment: dict[str, Any] | None = None) -> tuple[ResolvedExperiment, Plan, str]:
    """Configs under `workdir`, every stage computed on the stand-in; (experiment, plan, output root)."""
    exp = load_experiment(write_configs(workdir, experiment))
    plan = make_plan(exp)
    root = str(workdir / "runs")
    with stub_llm() as url:
        compute(exp, plan, root, url)
    return exp, plan, root
