"""The LLM slot judge of IBA CallAPI (C.2), against the real rule scorer: what it asks, what it leaves out,
how it is bound, and the agreement table (kappa cross-checked with statsmodels)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from perseval.benchmarks.iba.analysis import judge_views
from perseval.benchmarks.iba.judges.slot_llm import SlotLlmJudge
from perseval.benchmarks.iba.judges.slots import IbaSlotJudge
from perseval.benchmarks.iba.slot_agreement import agreement_table, slot_agreement_tables
from perseval.experiment.components import make_benchmark
from perseval.experiment.load import judge_specs
from perseval.experiment.load import load_experiment
from perseval.judges.base import JudgeBinding
from perseval.core.instances import AgentOutput, Instance
from tests.conftest import CONFIGS
from tests.scripted import ScriptedChat
from perseval.experiment.load import experiment_file


@pytest.fixture(scope="module")
def api_instances() -> list[Instance]:
    bench = make_benchmark("iba", {"noise_per_evidence": 1, "scenarios": ["Food ordering"]})
    insts = [i for i in bench.build(sample=4, seed=3, source=None).instances if i.payload["action_type"] == "call_api"]
    assert len(insts) >= 3
    return insts


def _value_in(messages: list[dict]) -> str:
    user = messages[-1]["content"]
    return user.split("<value>\n", 1)[1].split("\n</value>", 1)[0]


def _pref_in(messages: list[dict]) -> str:
    return messages[-1]["content"].split("The user's preference:\n", 1)[1]


def exact_judge(messages: list[dict]) -> str:
    """A scripted judge that passes a value exactly when the preference it was shown names it."""
    return json.dumps({"verdict": f"({_value_in(messages)})" in _pref_in(messages), "reason": "scripted"})


def _output(inst: Instance, slots: dict | None, status: str = "ok") -> AgentOutput:
    return AgentOutput(inst.instance_id, "a", 0, json.dumps(slots or {}), parsed=slots,
                       status=status)  # type: ignore[arg-type]


def _judge(judge, inst, out, binding):
    return asyncio.run(judge.judge(inst, out, binding))


def test_one_judgment_per_personalization_slot_given_the_task_and_the_preference(api_instances):
    inst = api_instances[0]
    gold = inst.gold["slots"]
    fixed = inst.payload["api"]["task_fixed"]
    chat = ScriptedChat(exact_judge)
    submitted = {**fixed, **gold}
    got = _judge(SlotLlmJudge(), inst, _output(inst, submitted), JudgeBinding("j", chat))
    assert [j.item_id for j in got] == list(gold) and all(j.score == 1.0 for j in got)
    assert len(chat.calls) == len(gold)  # task-fixed slots are never judged
    for call, (slot, value) in zip(chat.calls, gold.items()):
        text = call["messages"][-1]["content"]
        assert inst.query in text and f"Parameter: {slot}\n" in text and f"({value})" in _pref_in(call["messages"])
        assert not any(f"Parameter: {f}\n" in text for f in fixed)


def test_a_missing_slot_or_an_invalid_call_is_a_miss_without_a_judge_call(api_instances):
    inst = api_instances[0]
    gold = dict(inst.gold["slots"])
    first = next(iter(gold))
    chat = ScriptedChat(exact_judge)
    partial = {k: v for k, v in gold.items() if k != first}
    got = {j.item_id: j for j in _judge(SlotLlmJudge(), inst, _output(inst, partial), JudgeBinding("j", chat))}
    assert got[first].score == 0.0 and got[first].status == "scored" and len(chat.calls) == len(gold) - 1
    invalid = _judge(SlotLlmJudge(), inst, _output(inst, None, "invalid"), JudgeBinding("j", chat))
    assert [j.score for j in invalid] == [0.0] * len(gold) and len(chat.calls) == len(gold) - 1


def test_an_unreadable_answer_is_unscored_not_zero(api_instances):
    inst = api_instances[0]
    chat = ScriptedChat(json.dumps({"reason": "cannot tell"}))
    got = _judge(SlotLlmJudge(), inst, _output(inst, inst.gold["slots"]), JudgeBinding("j", chat))
    assert {j.status for j in got} == {"unscored"} and {j.score for j in got} == {None}
    (score,) = SlotLlmJudge().score(inst, _output(inst, inst.gold["slots"]), got)
    assert score.value is None and score.n_unscored == len(got)


def _frame(judgments, judge_col: str) -> pd.DataFrame:
    df = pd.DataFrame([asdict(j) for j in judgments])
    return df.assign(judge=judge_col, backbone="b", retriever="-")


def test_agreement_with_the_rule_scorer_and_kappa_against_statsmodels(api_instances):
    """Outputs that get some slots right and some wrong; a judge that passes a wrong value on one slot kind
    (lenient) disagrees with the exact rule there, and only there."""
    lenient_slot = next(iter(api_instances[0].gold["slots"]))

    def lenient(messages):
        if f"Parameter: {lenient_slot}\n" in messages[-1]["content"]:
            return json.dumps({"verdict": True, "reason": "close enough"})
        return exact_judge(messages)

    rule_rows, llm_rows = [], []
    rng = np.random.default_rng(0)
    for inst in api_instances:
        for rep in range(3):
            api = {s["name"]: s for s in inst.payload["api"]["slots"]}
            submitted = {}
            for slot, value in inst.gold["slots"].items():
                others = [v for v in api[slot]["values"] if v != value]
                submitted[slot] = value if rng.random() < 0.5 or not others else others[0]
            out = AgentOutput(inst.instance_id, "a", rep, json.dumps(submitted), parsed=submitted)
            rule_rows += _judge(IbaSlotJudge(), inst, out, JudgeBinding("iba.slots"))
            llm_rows += _judge(SlotLlmJudge(), inst, out, JudgeBinding("judge-x", ScriptedChat(lenient)))
    frame = pd.concat([_frame(rule_rows, "iba.slots"), _frame(llm_rows, "judge-x")], ignore_index=True)
    table = agreement_table(frame)
    rule = np.array([j.score for j in rule_rows]).astype(int)
    llm = np.array([j.score for j in llm_rows]).astype(int)
    disagree = [(r, j) for r, j in zip(rule_rows, llm_rows) if r.score != j.score]
    assert disagree and all(r.item_id == lenient_slot and j.score == 1.0 for r, j in disagree)
    row = table.loc["judge-x"]
    assert row["n"] == len(rule) and row["agreement_pct"] == pytest.approx(100.0 * (rule == llm).mean())
    confusion = pd.crosstab(rule, llm).reindex(index=[0, 1], columns=[0, 1], fill_value=0).to_numpy()
    assert row["kappa"] == pytest.approx(cohens_kappa(confusion).kappa)
    assert row["llm_pass_pct"] == pytest.approx(100.0 * llm.mean()) and table.loc["All", "n"] == row["n"]


def test_the_table_appears_only_when_an_llm_judge_scored_callapi(api_instances):
    ids = {i.instance_id for i in api_instances}
    scores = pd.DataFrame({"judge_model": ["-", "m"], "instance_id": [next(iter(ids)), "generate-1"]})

    def never() -> pd.DataFrame:
        raise AssertionError("judgments loaded though no LLM judge scored a CallAPI instance")

    assert slot_agreement_tables(scores, ids, never) == {}


def test_a_judge_that_scored_slots_takes_no_rule_rows_for_them():
    base = {"agent": "a", "backbone": "b", "retriever": "-", "repeat": 0, "metric": "score", "judge_repeat": 0}
    scores = pd.DataFrame([
        {**base, "instance_id": "api-1", "judge": "iba.slots", "judge_model": "-", "value": 100.0},
        {**base, "instance_id": "api-2", "judge": "iba.slots", "judge_model": "-", "value": 0.0},
        {**base, "instance_id": "api-1", "judge": "llm", "judge_model": "m", "value": 50.0},  # slot_llm
        {**base, "instance_id": "gen-1", "judge": "llm", "judge_model": "m", "value": 75.0},
    ])
    view = judge_views(scores)
    llm = view[view["judge"].eq("llm")].set_index("instance_id")["value"].to_dict()
    assert llm == {"api-1": 50.0, "gen-1": 75.0, "api-2": 0.0}  # its own api-1, the rule's api-2 only


def test_the_paper_config_binds_the_slot_judge_to_every_judge_and_the_quickstart_to_none():
    paper = load_experiment(experiment_file("iba_paper"))
    specs = {s.name: s.kinds for s in judge_specs(paper, 0)}
    assert specs == {"deepseek-v3.2-judge": ("iba.checkpoint", "iba.slot_llm"),
                     "qwen3-4b-judge": ("iba.checkpoint", "iba.slot_llm"),
                     "qwen3-30b-judge": ("iba.checkpoint", "iba.slot_llm"), "iba.slots": ("iba.slots",)}
    quick = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    assert {s.name: s.kinds for s in judge_specs(quick, 0)} == {"smollm2-judge": ("iba.checkpoint",),
                                                                 "iba.slots": ("iba.slots",)}


def test_the_iba_analysis_stage_reports_the_agreement(api_instances):
    """IbaBenchmark.analyze_run, as the analysis stage calls it: the agreement table beside the paper's
    tables, from the rule cell's and the LLM judge's judgments of the same outputs."""
    from perseval.benchmarks.base import ANALYSIS_COLUMNS, AnalysisInputs

    rows, judged = [], []
    for inst in api_instances:
        out = AgentOutput(inst.instance_id, "a", 0, "{}", parsed=dict(inst.gold["slots"]))
        for judge, binding, model in ((IbaSlotJudge(), JudgeBinding("iba.slots"), "-"),
                                      (SlotLlmJudge(), JudgeBinding("j", ScriptedChat(exact_judge)), "m")):
            js = _judge(judge, inst, out, binding)
            judged.append(_frame(js, binding.name))
            for s in judge.score(inst, out, js):
                rows.append({**asdict(s), "cell": f"iba/a/b/-/{binding.name}", "agent_kind": "rag",
                             "agent_params": "{}", "backbone": "b", "retriever": "-", "judge_model": model})
    scores = pd.DataFrame(rows)[ANALYSIS_COLUMNS]
    frame = pd.concat(judged, ignore_index=True)
    bench = make_benchmark("iba", {"noise_per_evidence": 1, "scenarios": ["Food ordering"]})
    out = bench.analyze_run(AnalysisInputs(scores, api_instances, outputs=lambda: pd.DataFrame(),
                                           judgments=lambda: frame, documents=lambda: []))
    table = out["slot_judge_agreement"]
    assert table.loc["j", "agreement_pct"] == 100.0 and table.loc["j", "n"] == len(frame) // 2
    assert "table4_mean_over_judges" in out
