"""Judge discrimination: the probe answers perseval writes (gold, empty, wrong-user), their known verdicts,
and the report on a judge that reads the response and on one that passes everything (the embedded
judge's behaviour in issue 21: 120 of 120 true)."""
from __future__ import annotations

import asyncio
import json

import pytest
from sklearn.metrics import roc_auc_score

from perseval.benchmarks.action_judges import CheckpointParams
from perseval.llm.settings import ModelConfig, Sampling
from perseval.experiment.specs import JudgeSpec
from perseval.benchmarks.probes import EMPTY, GOOD, WRONG
from perseval.pipeline.probes import judge_probes, probe_answers, probe_report
from perseval.report.words import NOT_INTERPRETABLE

from .scripted import ScriptedChat
from .conftest import build


def _reading_judge(messages) -> str:
    """Passes a requirement only when the response states it: a judge that really reads."""
    content = messages[-1]["content"]
    requirement = content.split("Requirement:\n", 1)[1].split("\n\nDoes the response", 1)[0]
    return json.dumps({"verdict": content.count(requirement) >= 2, "reason": "checked"})


MODEL = ModelConfig(name="m", format="api", source="m", deployment="d")
SPEC = JudgeSpec("j", ("iba.checkpoint",), {"iba.checkpoint": CheckpointParams()}, MODEL, Sampling(), uses_llm=True)


def _instances():
    return build(sample=8, scenarios=["Weekly plan"]).instances


def test_probe_answers_state_the_gold_say_nothing_or_give_another_users_preferences():
    insts = _instances()
    outputs, labels = probe_answers(insts, 3, seed=1)
    by = {(o.agent, o.instance_id): o for o in outputs}
    picked = {o.instance_id for o in outputs}
    assert len(picked) == 3 and outputs == probe_answers(insts, 3, seed=1)[0]  # seeded
    for iid in picked:
        inst = next(i for i in insts if i.instance_id == iid)
        cps = inst.gold["checkpoints"]
        assert all(c["statement"] in by[(f"probe:{GOOD}", iid)].text for c in cps)
        assert by[(f"probe:{EMPTY}", iid)].text == ""
        wrong = [k for k in labels if k[0] == f"probe:{WRONG}" and k[1] == iid]
        mine = {c["id"]: c["value"] for c in cps}
        assert all(labels[k] == 0 and k[2] in mine for k in wrong)  # only items whose gold value differs
        assert all(labels[(f"probe:{GOOD}", iid, c["id"])] == 1 for c in cps)


def test_a_judge_that_reads_separates_good_from_bad_and_one_that_passes_everything_is_flagged():
    insts = _instances()
    _, labels = probe_answers(insts, 4, seed=2)
    reading = asyncio.run(judge_probes(SPEC, ScriptedChat(_reading_judge), insts, 4, 2))
    good = probe_report(reading, labels)
    assert good["pass_rate.gold"] == 100.0 and good["pass_rate.empty"] == 0.0 and good["auc"] == 1.0
    assert good["discriminates"] is True
    yes = ScriptedChat(json.dumps({"verdict": True, "reason": "the response meets it"}))  # a placeholder: unscored
    lazy = asyncio.run(judge_probes(SPEC, yes, insts, 4, 2))
    bad = probe_report(lazy, labels)
    assert bad["pass_rate.gold"] == bad["pass_rate.bad"] == 100.0 and bad["auc"] == 0.5
    assert bad["discriminates"] is False
    known = [j for j in lazy if (j.agent, j.instance_id, j.item_id) in labels]  # a wrong-user item that agrees:
    assert bad["auc"] == roc_auc_score([labels[(j.agent, j.instance_id, j.item_id)] for j in known],
                                       [j.score for j in known])  # judged, but its verdict is not known
    assert len(yes.calls) == len(lazy) and bad["n_items"] == len(known) <= len(lazy)  # one request per item
    assert NOT_INTERPRETABLE == "judge does not discriminate: scores not interpretable"


def test_a_judge_with_nothing_of_known_verdict_to_judge_is_not_flagged():
    call_api = build(sample=4, scenarios=["Food ordering"]).instances  # slots only: no checkpoint to probe
    assert probe_answers(call_api, 3, seed=1) == ([], {})
    assert probe_report([], {})["discriminates"] is None
