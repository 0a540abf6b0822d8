"""`threshold: calibrated` (issue 44): the P(true) cut that maximizes Youden's J on the probe items (against
scikit-learn's roc_curve), pass rates cross-fitted by probe instance, the errors of a calibrated judge that
cannot be calibrated, the keys it moves (and those it leaves), and a calibrated judge's cells scored at the
threshold its probe chose, through the real stages against a local server that returns known logprobs."""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import yaml
from sklearn.metrics import roc_curve

from perseval.core.errors import ConfigError
from perseval.core.instances import AgentOutput, InstanceScore, Judgment
from perseval.core.store import StageStore
from perseval.judges.base import at_threshold
from perseval.llm.endpoint import Endpoint
from perseval.metrics.auc import youden_threshold
from perseval.pipeline.plan import make_plan
from perseval.pipeline.units import shards
from perseval.pipeline.runner import score_outputs
from perseval.pipeline.freshness import score_done
from perseval.pipeline.stages import Runtime, as_scored, construct, judge, load_instances, run_shard, score
from perseval.pipeline import probes
from perseval.report.build import probe_check, probe_checks
from perseval.report.words import NOT_INTERPRETABLE
from perseval.report.views.probe_check import probe_lines
from perseval.report.views.text import judge_text
from perseval.experiment.components import make_judges
from perseval.experiment.load import load_experiment
from tests.http_stub import JsonHandler, completion, serve

from .record_helpers import cell as record_cell
from .conftest import CONFIGS, copy_configs


# --- the threshold -------------------------------------------------------------------------------------------------

def _sklearn_youden(labels: list[int], scores: list[float]) -> float:
    """Youden's J from scikit-learn's ROC points, every cut kept, the highest of the best (the first, inf, passes
    nothing and is not a cut perseval chooses)."""
    fpr, tpr, cuts = roc_curve(labels, scores, drop_intermediate=False)
    j = (tpr - fpr)[1:]
    return float(cuts[1:][np.isclose(j, j.max(), rtol=0, atol=1e-12)].max())


@pytest.mark.parametrize("seed", range(6))
def test_the_threshold_is_youdens_j_on_scikit_learns_roc_curve(seed):
    rng = random.Random(seed)
    labels = [int(rng.random() < 0.5) for _ in range(40)] + [0, 1]
    scores = [round(min(max(rng.gauss(0.8 + 0.05 * y, 0.05), 0.0), 1.0), 2) for y in labels]  # ties too
    assert youden_threshold(labels, scores) == pytest.approx(_sklearn_youden(labels, scores))


def test_a_tie_goes_to_the_higher_cut_and_one_class_gives_none():
    # cut 0.6: TPR 1, FPR 1/2 (J 0.5); cut 0.8: TPR 1/2, FPR 0 (J 0.5): the higher one passes no bad item
    assert youden_threshold([1, 1, 0, 0], [0.6, 0.8, 0.2, 0.6]) == 0.8 == _sklearn_youden([1, 1, 0, 0],
                                                                                          [0.6, 0.8, 0.2, 0.6])
    assert youden_threshold([1, 1], [0.3, 0.9]) is None


# --- the report ----------------------------------------------------------------------------------------------------

def _j(iid: str, agent: str, item: str, p: float | None, method: str = "logprobs") -> Judgment:
    return Judgment(iid, f"probe:{agent}", 0, "j", 0, item, "checkpoint", float(p >= 0.5) if p is not None else 1.0,
                    "scored", "", "", None, p, method)


def test_pass_rates_at_a_calibrated_threshold_are_cross_fitted_by_probe_instance():
    """Three instances; each one's items are read at the cut fitted on the two others. By hand: without a, the
    goods 0.9 and 0.8 against the bads 0.7 and 0.75 give the cut 0.8 (J 1), so a's good 0.82 and its bad 0.85
    pass; without b, goods 0.82 and 0.8 against bads 0.85 and 0.75 give 0.8 (J 1/2), so b's good 0.9 passes
    and its bad 0.7 does not; without c, goods 0.82 and 0.9 against bads 0.85 and 0.7 tie 0.82 and 0.9 (J 1/2)
    and the higher wins, so c's good 0.8 and its bad 0.75 fail. Gold 2 of 3, bad 1 of 3."""
    ps = {"a": (0.82, 0.85), "b": (0.9, 0.7), "c": (0.8, 0.75)}
    judgments = [j for iid, (good, bad) in ps.items()
                 for j in (_j(iid, probes.GOOD, "x", good), _j(iid, probes.EMPTY, "x", bad))]
    labels = {(j.agent, j.instance_id, j.item_id): int(j.agent == f"probe:{probes.GOOD}") for j in judgments}
    rep = probes.probe_report(judgments, labels, calibrated=True)
    assert rep["threshold"] == pytest.approx(youden_threshold([1, 0] * 3, [p for g_b in ps.values() for p in g_b]))
    assert rep["pass_rate.good"] == pytest.approx(100 * 2 / 3) and rep["pass_rate.bad"] == pytest.approx(100 / 3)
    assert (rep["n.good"], rep["n.bad"], rep["pass_rates"]) == (3, 3, "cross-fitted by probe instance")
    plain = probes.probe_report(judgments, labels)  # at 0.5: everything passes, and no threshold is chosen
    assert plain["pass_rate.bad"] == 100.0 and "threshold" not in plain and plain["auc"] == rep["auc"]
    rule = [replace(_j(iid, probes.WRONG, "x", None, ""), score=0.0) for iid in ps]  # absent by rule, not asked
    with_rule = probes.probe_report(judgments + rule, {**labels, **{(j.agent, j.instance_id, "x"): 0 for j in rule}},
                                    calibrated=True)
    assert with_rule["threshold"] == rep["threshold"] and with_rule["threshold_items"] == 6  # they choose nothing
    assert with_rule["pass_rate.bad"] == pytest.approx(100 / 6)
    text = [_j(iid, probes.GOOD, "x", None, "text") for iid in ps] + [_j(iid, probes.EMPTY, "x", None, "text")
                                                                      for iid in ps]
    no_p = probes.probe_report(text, labels, calibrated=True)
    assert no_p["threshold"] is None and no_p["discriminates"] is False  # no P(true): nothing to calibrate
    assert probe_check(no_p).flag == f"{NOT_INTERPRETABLE} ({probes.UNCALIBRATED_NOTE})"
    assert probe_check(plain).flag == NOT_INTERPRETABLE  # at 0.5 it passes every bad item: the plain flag


def test_verdicts_given_by_rule_choose_no_threshold():
    """An empty response's claims are absent by rule (no P(true)): 0 at any threshold, they would only pull the
    cut down (here from 0.9 to 0.6, which passes the known-bad 0.7)."""
    asked = [_j("a", probes.GOOD, "x", 0.6), _j("b", probes.GOOD, "x", 0.9), _j("c", probes.EMPTY, "x", 0.7)]
    rule = [replace(_j(iid, probes.WRONG, "x", None, ""), score=0.0) for iid in "abc"]
    labels = {(j.agent, j.instance_id, j.item_id): int(j.agent == f"probe:{probes.GOOD}") for j in asked + rule}
    rep = probes.probe_report(asked + rule, labels, calibrated=True)
    assert (rep["threshold"], rep["threshold_items"], rep["auc_from"]) == (0.9, 3, "p_true")
    assert youden_threshold([1, 1, 0, 0, 0, 0], [0.6, 0.9, 0.7, 0, 0, 0]) == 0.6


def test_reading_again_changes_only_verdicts_read_from_p_true():
    js = [_j("a", "g", "x", 0.7), _j("a", "g", "y", None, "text"), _j("a", "g", "z", None, "")]
    hi, none = at_threshold(js, 0.8), at_threshold(js, None, "no probe")
    assert [j.score for j in hi] == [0.0, 1.0, 1.0] and hi[0].p_true == 0.7
    assert (none[0].status, none[0].score, none[0].feedback) == ("unscored", None, "no probe") and none[1:] == js[1:]


# --- errors and keys -----------------------------------------------------------------------------------------------

def _experiment(tmp_path, override: dict | None = None, judge: dict | None = None, **exp: Any):
    root = tmp_path / "configs"
    if not root.exists():
        copy_configs(root)
    data = yaml.safe_load((CONFIGS / "experiments" / "quickstart.yaml").read_text())
    data.update(exp)
    if override is not None:
        judges = data.setdefault("overrides", {}).setdefault("judges", {})
        judges["smollm2-judge"] = {**judges.get("smollm2-judge", {}), **override}  # beside the quickstart's own
    if judge is not None:
        path = root / "judges" / f"{judge['name']}.yaml"
        path.write_text(yaml.safe_dump(judge))
    path = root / "experiments" / "q.yaml"
    path.write_text(yaml.safe_dump({**data, "name": "q"}))
    return path


def test_calibrated_needs_two_probe_instances_and_a_probed_judge(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_experiment(_experiment(tmp_path, {"threshold": "calibrated"}, judge_probes=1))
    msg = str(err.value)
    assert "q.yaml: key 'overrides.judges.smollm2-judge.threshold'" in msg and "judge_probes: 1" in msg
    assert "a number in (0, 1), or `calibrated`" in msg
    judge = {"name": "criteria-only", "kind": "bespoke.criteria", "model": "smollm2-135m", "threshold": "calibrated"}
    bespoke = [{"name": "bespoke", "sample": 4, "agents": ["bespoke-no-context"]}]
    with pytest.raises(ConfigError, match=r"criteria-only.yaml: key 'threshold'.*no probe items on benchmark "
                                          r"'bespoke'"):
        load_experiment(_experiment(tmp_path, judge=judge, judges=["smollm2-judge", "criteria-only"],
                                    benchmarks=bespoke))
    for bad in ("calibratd", 1.0, 0, True):
        with pytest.raises(ConfigError, match=r"threshold': .* is not allowed: a number in \(0, 1\), or `calibrated`"):
            load_experiment(_experiment(tmp_path, {"threshold": bad}))


def test_only_a_calibrated_judges_score_and_probe_keys_move(tmp_path):
    base = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    half = make_plan(load_experiment(_experiment(tmp_path, {"threshold": 0.5})))
    cal = make_plan(load_experiment(_experiment(tmp_path, {"threshold": "calibrated"})))

    def keys(plan):
        return {c.name: (c.run.key, c.judged.key, c.key) for c in plan.cells}

    assert keys(half) == keys(base)  # the default written out: nothing moves
    b, c = keys(base), keys(cal)
    assert {n: k[:2] for n, k in c.items()} == {n: k[:2] for n, k in b.items()}  # runs and judgings stay
    moved = {n for n in b if b[n][2] != c[n][2]}
    assert moved == {n for n in b if n.endswith("/smollm2-judge")} and moved
    assert all(cell.probe in {u.key for u in probes.probe_units(cal)} for cell in cal.cells if cell.name in moved)
    assert {u.key for u in probes.probe_units(cal)}.isdisjoint(u.key for u in probes.probe_units(base))


# --- end to end ----------------------------------------------------------------------------------------------------

MET, NOT_MET = 0.85, 0.75  # the stub's P(true): above 0.5 either way, so at 0.5 every item passes


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """A judge that reads, with probabilities: P(true) 0.85 where the response states the requirement, 0.75
    where it does not; its text verdict always true."""
    content = body["messages"][-1]["content"]
    requirement = content.split("Requirement:\n", 1)[1].split("\n\n", 1)[0]
    p = MET if content.count(requirement) >= 2 else NOT_MET
    text = '{"verdict": true, "reason": "checked"}'
    top = {"true": math.log(p), "false": math.log(1 - p)}
    tokens = [{"token": t, "logprob": top.get(t, 0.0), "bytes": None,
               "top_logprobs": [{"token": k, "logprob": v, "bytes": None} for k, v in (top if t == "true" else
                                                                                       {t: 0.0}).items()]}
              for t in ("{", '"', "verdict", '":', " ", "true", ",", ' "reason": "checked"', "}")]
    out = completion(text)
    out["choices"][0]["logprobs"] = {"content": tokens}
    return out


def test_a_calibrated_judges_cells_are_scored_at_the_threshold_its_probe_chose(tmp_path):
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            self.reply(200, _answer(self.request_json()))

    iba = [{"name": "iba", "sample": 4, "agents": ["iba-oracle"],
            "params": {"noise_per_evidence": 2, "scenarios": ["Weekly plan"]}}]
    exp = load_experiment(_experiment(tmp_path, {"threshold": "calibrated"}, benchmarks=iba,
                                      output_root=str(tmp_path / "runs")))
    plan = make_plan(exp)
    root = str(tmp_path / "runs")
    cells = [c for c in plan.cells if c.judge == "smollm2-judge"]
    (unit,) = probes.probe_units(plan)
    assert len(cells) == 1 and {c.probe for c in cells} == {unit.key}
    with serve(Handler) as url:
        endpoint = Endpoint("smollm2-135m", "openai", f"{url}/v1", "m", "hf:abc", None, 4, 10.0, 0)
        rt = Runtime(root, "r", str(tmp_path / "c.sqlite"), 4, endpoints={"smollm2-135m": endpoint})
        construct(plan.data[0], rt)
        for c in cells:
            for s in shards(len(load_instances(root, c.run.data.key)), rt.shard_size):
                run_shard(c.run, s, rt)
                judge(c.judged, s, rt)
        report = probes.probe(unit, rt)["report"]
        for c in cells:
            score(c, rt)
    assert report["threshold"] == MET and report["auc"] == 1.0 and report["discriminates"] is True
    assert (report["pass_rate.good"], report["pass_rate.bad"]) == (100.0, 0.0)  # cross-fitted: 0.85 on each fold
    instances = {i.instance_id: i for i in load_instances(root, plan.data[0].key)}
    judges = make_judges(cells[0].judged.judge)
    for c in cells:
        stored = StageStore(root, "judge", c.judged.key).read_records(Judgment)
        outputs = StageStore(root, "run", c.run.key).read_records(AgentOutput)
        assert {j.p_true for j in stored} <= {MET, NOT_MET} and {j.score for j in stored} == {1.0}  # all pass at 0.5
        got = {(s.instance_id, s.metric): s.value for s in StageStore(root, "score", c.key).read_records(InstanceScore)
               if s.judge == "smollm2-judge"}
        want = {(s.instance_id, s.metric): s.value for s in score_outputs(judges, instances, outputs,
                                                                          at_threshold(stored, MET))}
        at_half = {(s.instance_id, s.metric): s.value for s in score_outputs(judges, instances, outputs, stored)}
        assert got == want and got != at_half  # the oracle's lines do not state a requirement word for word
    (c,) = cells
    ids = shards(len(instances), 4)
    assert score_done(root, c, ids)
    time.sleep(0.01)
    StageStore(root, "probe", unit.key).mark_complete(StageStore(root, "probe", unit.key).manifest())  # redone
    assert not score_done(root, c, ids)  # a redone probe rescores the cells it calibrates
    unprobed = as_scored(root, replace(c, probe="0" * 16), stored)  # no such probe: no threshold to read at
    assert {(j.status, j.score) for j in unprobed} == {("unscored", None)} and "not complete" in unprobed[0].feedback
    check = probe_checks(plan, root)[(c.entry, "smollm2-judge")]  # as the record holds it
    row = record_cell(c.entry, c.agent, "smollm2-judge", 50.0).model_copy(update={"probe": check})
    assert check.threshold == MET and judge_text(row) == "1.00 ✓ t=0.85"
    assert "calibrated threshold t=0.85" in probe_lines([row])[0]

