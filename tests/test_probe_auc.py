"""The probe AUC from verdict probabilities with DeLong's interval (against scikit-learn's roc_auc_score and a
bootstrap), PrefEval's generation probes built from the release and judged by the real judge, and a judge
that does not discriminate shown as `—` with its AUC."""
from __future__ import annotations

import asyncio
import json
import random

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from perseval.benchmarks.prefeval.judges.generation import GenerationJudge
from perseval.benchmarks.prefeval.probes import EMPTY, HONOURS, REFUSAL, VIOLATES, WRONG_PREF
from perseval.core.instances import Judgment
from perseval.metrics.auc import auc_interval
from perseval.pipeline.probes import judge_probes, probe_answers, probe_report
from perseval.report.record import ProbeCheck
from perseval.report.views.text import judge_text, score_text
from perseval.llm.settings import ModelConfig, Sampling
from perseval.experiment.specs import JudgeSpec
from perseval.benchmarks.base import build_all
from perseval.benchmarks.prefeval.benchmark import PrefEval
from tests.conftest import REPO
from tests.scripted import ScriptedChat
from tests.record_helpers import cell


def load(**params):
    """The hand-written PrefEval sample (tests/data/prefeval, the official layout) as instances."""
    return build_all(PrefEval(PrefEval.Params(**params)), sample=100, seed=3, source=REPO / "tests" / "data" / "prefeval")


def test_the_auc_is_scikit_learns_and_its_interval_covers_a_bootstrap():
    rng = random.Random(4)
    labels = [1] * 30 + [0] * 25
    scores = [round(rng.gauss(0.6 if y else 0.4, 0.2), 2) for y in labels]  # rounded: ties too
    got = auc_interval(labels, scores)
    assert got is not None and got.auc == pytest.approx(roc_auc_score(labels, scores))
    r = np.random.default_rng(0)
    pos, neg = np.array(scores[:30]), np.array(scores[30:])
    boot = [roc_auc_score([1] * 30 + [0] * 25, np.concatenate([r.choice(pos, 30), r.choice(neg, 25)]))
            for _ in range(2000)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    assert got.ci_low < got.auc < got.ci_high
    assert abs(got.ci_low - lo) < 0.03 and abs(got.ci_high - hi) < 0.03  # DeLong agrees with a bootstrap
    assert auc_interval([1, 1], [0.3, 0.4]) is None  # one class: no AUC


def _judgment(agent: str, iid: str, item: str, p: float | None, score: float) -> Judgment:
    return Judgment(iid, agent, 0, "j", 0, item, "check", score, "scored", "", "", None, p,
                    "logprobs" if p is not None else "text")


def test_the_probe_auc_reads_p_true_where_every_verdict_has_one():
    labels = {("probe:a", str(k), "x"): k % 2 for k in range(8)}
    ps = [0.2, 0.7, 0.4, 0.9, 0.3, 0.6, 0.55, 0.8]  # verdicts at 0.5 would tie the 0.55 bad with the goods
    judgments = [_judgment("probe:a", str(k), "x", p, float(p >= 0.5)) for k, p in enumerate(ps)]
    rep = probe_report(judgments, labels)
    ys = [k % 2 for k in range(8)]
    assert rep["auc_from"] == "p_true" and rep["auc"] == pytest.approx(roc_auc_score(ys, ps))
    assert rep["auc"] != pytest.approx(roc_auc_score(ys, [float(p >= 0.5) for p in ps]))
    text_only = [_judgment("probe:a", str(k), "x", None, float(p >= 0.5)) for k, p in enumerate(ps)]
    assert probe_report(text_only, labels)["auc_from"] == "verdict"


MODEL = ModelConfig(name="m", format="api", source="m", deployment="d")
SPEC = JudgeSpec("j", ("prefeval.generation",), {"prefeval.generation": GenerationJudge.Params()}, MODEL,
                 Sampling(), uses_llm=True)


def _reading_judge(messages) -> str:
    """A judge that applies each check by rule to the quoted response: it reads."""
    content = messages[-1]["content"]
    response = content.split("<response>\n", 1)[1].split("\n</response>", 1)[0]
    pref = content.split("The user's real preference:\n", 1)[1].split("\n\n", 1)[0] \
        if "real preference" in content else ""
    named = response.startswith("You told me")
    verdict = {"Does the response mention": named,
               "DIFFERENT from": named and pref not in response,
               "goes against": response.startswith("I suggest"),
               "actually try": "I suggest" in response}
    v = next(v for k, v in verdict.items() if k in content)
    return json.dumps({"verdict": v, "reason": "checked by rule"})


def test_prefeval_generation_probes_are_built_from_the_release_and_judged():
    insts = load(inter_turns=[0]).instances
    outputs, labels = probe_answers(insts, 3, 5)
    kinds = {o.agent.split(":", 1)[1] for o in outputs}
    assert kinds == {HONOURS, VIOLATES, WRONG_PREF, REFUSAL, EMPTY}
    picked = {o.instance_id for o in outputs}
    assert len(picked) == 3 and all(i.endswith("-gen") for i in picked)
    for o in outputs:
        inst = next(i for i in insts if i.instance_id == o.instance_id)
        if o.agent == f"probe:{HONOURS}":
            assert inst.gold["preference"].strip() in o.text
            assert labels[(o.agent, o.instance_id, "violates")] == 0 and labels[(o.agent, o.instance_id,
                                                                                 "helpful")] == 1
        if o.agent == f"probe:{VIOLATES}":  # a preference-breaking option of the same row of mcq_options
            assert labels[(o.agent, o.instance_id, "violates")] == 1 and inst.gold["preference"] not in o.text
    reading = asyncio.run(judge_probes(SPEC, ScriptedChat(_reading_judge), insts, 3, 5))
    rep = probe_report(reading, labels)
    assert rep["auc"] == 1.0 and rep["discriminates"] is True and rep["n_items"] >= 30
    lazy = asyncio.run(judge_probes(SPEC, ScriptedChat(json.dumps({"verdict": True, "reason": "it is"})), insts,
                                    3, 5))
    flat = probe_report(lazy, labels)
    assert flat["auc"] == 0.5 and flat["discriminates"] is False


def test_a_non_discriminating_judges_cell_shows_a_dash_with_its_auc():
    row = cell("iba", "a", "j", 100.0, 29.2, 100.0)
    assert score_text(row) == "100.0 [29.2, 100.0]"
    flagged = cell("iba", "a", "j", 100.0, 29.2, 100.0, flagged=True)
    assert score_text(flagged) == "—" and judge_text(flagged) == "0.50 ✗"  # the AUC in the column beside it
    assert flagged.estimate.point is None and flagged.estimate.uninterpretable_mean == 100.0  # kept, named
    good = row.model_copy(update={"probe": ProbeCheck(auc=0.9, pass_rate_gold=100.0, pass_rate_bad=10.0,
                                                      discriminates=True, items=12)})
    assert score_text(good) == "100.0 [29.2, 100.0]" and judge_text(good) == "0.90 ✓"
