"""APeB's paper protocol: the whole history reaches the agent (not the last 30 events), and the strict
reading of "exactly 5" is scored beside the repaired one, by the real agent and the real judges."""
from __future__ import annotations

import asyncio
import json

import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.apeb.agents.direct import APeBDirect
from perseval.benchmarks.apeb.agents.oracle import APeBOracle
from perseval.benchmarks.apeb.benchmark import APeB
from perseval.benchmarks.apeb.judges.ranking import ApebRankingJudge, StrictRankingJudge
from perseval.experiment.components import make_agent
from perseval.experiment.load import bound, judge_specs
from perseval.experiment.load import load_experiment
from perseval.judges.base import JudgeBinding
from perseval.core.instances import Document
from tests.conftest import CONFIGS
from tests.scripted import ScriptedChat
from perseval.experiment.load import experiment_file


@pytest.fixture(scope="module")
def inst():
    return APeB().build(sample=3, seed=5, source=None).instances[0]


def _history(n: int) -> list[Document]:
    return [Document("u", f"d{i}", f"viewed item-{i:03d}", f"2026-01-{1 + i % 28:02d}T10:00:00") for i in range(n)]


def _act(agent, inst, answers, docs=None):
    chat = ScriptedChat(answers)
    ctx = AgentContext(llm=chat, documents=lambda user: docs if docs is not None else _history(3))
    return asyncio.run(agent.act(inst.public(), ctx, 0, "apeb-direct")), chat


def _scores(judge, inst, out):
    judgments = asyncio.run(judge.judge(inst, out, JudgeBinding(judge.kind)))
    return {s.metric: s.value for s in judge.score(inst, out, judgments)}


def test_the_paper_agent_sees_the_whole_history_and_the_cpu_one_the_last_30(inst):
    ids = [c["id"] for c in inst.payload["candidates"]][:5]
    docs = _history(70)
    paper = load_experiment(experiment_file("apeb_paper"))
    cpu = load_experiment(experiment_file("apeb_cpu"))
    seen = {}
    for name, exp in (("paper", paper), ("cpu", cpu)):
        _, chat = _act(make_agent(bound(exp).agents["apeb-direct"]), inst, json.dumps({"ranking": ids}), docs)
        prompt = chat.calls[0]["messages"][-1]["content"]
        seen[name] = [d.text for d in docs if d.text in prompt]
    assert seen["paper"] == [d.text for d in docs]
    assert seen["cpu"] == [d.text for d in docs[-30:]]


def test_a_clean_answer_scores_the_same_under_both_readings(inst):
    gold = inst.gold["purchased"]
    ids = [gold, *[c["id"] for c in inst.payload["candidates"] if c["id"] != gold]][:5]
    out, _ = _act(APeBDirect({"history_items": 30}), inst, json.dumps({"ranking": ids}))
    repaired, strict = _scores(ApebRankingJudge(), inst, out), _scores(StrictRankingJudge(), inst, out)
    assert repaired["hit@1"] == 100.0 and {f"{m}_strict": v for m, v in repaired.items()} == strict


@pytest.mark.parametrize("case", ["duplicate", "unknown", "correction"])
def test_a_repaired_answer_counts_under_repair_and_is_invalid_under_the_strict_reading(inst, case):
    gold = inst.gold["purchased"]
    ids = [gold, *[c["id"] for c in inst.payload["candidates"] if c["id"] != gold]][:5]
    answers = {"duplicate": [json.dumps({"ranking": [gold, gold, *ids[1:]]})],
               "unknown": [json.dumps({"ranking": [gold, "p-nope", *ids[1:]]})],
               "correction": [json.dumps({"ranking": ids[:4]}), json.dumps({"ranking": ids[4:]})]}[case]
    out, chat = _act(APeBDirect({"history_items": 30}), inst, answers)
    assert out.status == "ok" and len(chat.calls) == (2 if case == "correction" else 1)
    repaired, strict = _scores(ApebRankingJudge(), inst, out), _scores(StrictRankingJudge(), inst, out)
    assert repaired["hit@1"] == 100.0 and repaired["valid"] == 100.0
    assert strict == {"hit@1_strict": 0.0, "hit@5_strict": 0.0, "mrr_strict": 0.0, "valid_strict": 0.0}


def test_a_system_without_a_model_passes_the_strict_reading(inst):
    out = asyncio.run(APeBOracle().act(inst, AgentContext(), 0, "apeb-oracle"))
    assert _scores(StrictRankingJudge(), inst, out)["hit@1_strict"] == 100.0


def test_the_strict_judge_sits_beside_the_repaired_one_in_the_apeb_configs():
    for name in ("apeb_paper", "apeb_cpu"):
        exp = load_experiment(experiment_file(name))
        kinds = {k for s in judge_specs(exp, 0) for k in s.kinds}
        assert {"apeb.ranking", "apeb.ranking_strict"} <= kinds
