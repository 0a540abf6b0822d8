"""IBA-Bench thin slice: taxonomy, construction, judging, slot scoring and reference agents."""
from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import yaml

from perseval.agents.rag import RagAgent
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.benchmarks.iba.agents.oracle import IbaOracleAgent
from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.iba.judges.checkpoint import IbaCheckpointJudge
from perseval.benchmarks.iba.judges.slots import IbaSlotJudge
from perseval.judges.base import JudgeBinding
from perseval.benchmarks.iba.taxonomy import parse_taxonomy
from perseval.experiment.config import AgentConfig, load_config
from perseval.core.errors import ConfigError, InputError
from perseval.core.instances import AgentOutput
from tests.scripted import ScriptedChat
from .conftest import build, by_owner, context, evidence, shipped_config

ROOT = Path(__file__).resolve().parents[1]
GENERATE = ["Academic paper writing", "Weekly plan"]
CALL_API = ["Food ordering", "Ticket booking", "Appointment registration"]


def judge_and_score(instance, output, binding=None):
    """The judge that applies to `instance` (checkpoints: LLM; CallAPI slots: rule), as the pipeline picks it."""
    judge = next(j for j in (IbaCheckpointJudge(), IbaSlotJudge()) if j.applies(instance))
    judgments = asyncio.run(judge.judge(instance, output, binding or JudgeBinding("iba.slots")))
    return judgments, judge.score(instance, output, judgments)[0]


# --- taxonomy -------------------------------------------------------------------------


def test_taxonomy_covers_both_action_types_with_exclusive_values():
    tax = load_taxonomy()
    kinds = [s.action_type for s in tax.scenarios]
    assert kinds.count("generate") >= 2 and kinds.count("call_api") >= 2
    assert len(tax.domains) >= 3
    for s in tax.scenarios:
        assert s.domain and s.name and s.dimensions
        for d in s.dimensions:
            assert len(d.values) >= 2 and len(set(d.value_ids)) == len(d.value_ids)
            assert all(v.evidence and v.checkpoint for v in d.values)
        if s.action_type == "call_api":
            assert s.api is not None and s.api.fixed_slots
            for slot in s.api.personal_slots:
                assert list(slot.values) == s.dimension(slot.dimension).value_ids
    assert any(d.dynamic for s in tax.scenarios for d in s.dimensions)
    assert not any(d.dynamic for s in tax.scenarios if not s.dynamic for d in s.dimensions)


def test_taxonomy_rejects_a_shift_to_an_unknown_value():
    path = ROOT / "perseval/benchmarks/iba/scenarios.yaml"
    data = yaml.safe_load(path.read_text())
    data["domains"][0]["scenarios"][0]["dimensions"][1]["shifts"] = [["we", "nonexistent"]]
    with pytest.raises(InputError, match="shift"):
        parse_taxonomy(data, path)


# --- construction ---------------------------------------------------------------------


def test_construction_is_deterministic_for_a_seed():
    a, b, c = build(seed=3), build(seed=3), build(seed=4)
    assert [asdict(i) for i in a.instances] == [asdict(i) for i in b.instances]
    assert [asdict(d) for d in a.documents] == [asdict(d) for d in b.documents]
    assert [asdict(d) for d in a.documents] != [asdict(d) for d in c.documents]


def test_sample_is_balanced_across_action_types_and_scenarios():
    data = build(sample=12, scenarios=GENERATE + CALL_API)
    assert data.info["by_action_type"] == {"generate": 6, "call_api": 6}
    assert set(data.info["by_scenario"]) == set(GENERATE + CALL_API)
    assert {i.group for i in data.instances} == set(data.info["by_domain"])
    only = build(sample=4, scenarios=["Food ordering"])
    assert {i.payload["scenario"] for i in only.instances} == {"Food ordering"}
    with pytest.raises(ConfigError, match="scenarios"):
        build(sample=2, scenarios=["Space travel"])
    with pytest.raises(ConfigError, match="noise_ratio.: unknown key"):
        IbaBenchmark({"noise_ratio": 3})


def test_every_gold_item_has_supporting_evidence_and_counts_are_recorded():
    data = build(sample=12, dynamic_rate=0.5)
    owners = by_owner(data.documents)
    for inst in data.instances:
        ev = evidence(owners[inst.user_id])
        gold = {c["dimension"]: c["value"] for c in inst.gold.get("checkpoints", [])}
        if inst.payload["action_type"] == "call_api":
            slot_dim = {s.name: s.dimension for s in load_taxonomy().scenario(inst.payload["scenario"]).api.personal_slots}
            gold = {slot_dim[name]: value for name, value in inst.gold["slots"].items()}
        assert gold and len(gold) == inst.payload["n_constraints"]
        assert len(ev) == inst.payload["n_evidence"] >= len(gold)
        for dim, value in gold.items():
            support = [d for d in ev if d.meta["dimension"] == dim]
            assert support and support[-1].meta["value"] == value  # the latest evidence states the gold
            assert all(d.meta["scenario"] == inst.payload["scenario"] for d in support)
            assert {"kind", "dynamic_phase"} <= set(support[-1].meta)


def test_dynamic_preferences_put_old_evidence_before_new():
    data = build(sample=10, dynamic_rate=1.0)
    owners = by_owner(data.documents)
    n_dynamic = 0
    for inst in data.instances:
        docs = owners[inst.user_id]
        stamps = [d.timestamp for d in docs]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        for pref in inst.gold["preferences"]:
            if not pref["dynamic"]:
                continue
            n_dynamic += 1
            turns = [d for d in evidence(docs) if d.meta["dimension"] == pref["dimension"]]
            old = [d.timestamp for d in turns if d.meta["dynamic_phase"] == "old"]
            new = [d.timestamp for d in turns if d.meta["dynamic_phase"] == "new"]
            assert old and new and max(old) < min(new)
            assert {d.meta["value"] for d in turns if d.meta["dynamic_phase"] == "old"} == {pref["previous"]}
            assert pref["previous"] != pref["value"]
    assert n_dynamic >= 3
    assert data.info["n_dynamic_preferences"] == n_dynamic


@pytest.mark.parametrize("ratio", [0, 3, 12.5])
def test_noise_ratio_follows_the_parameter(ratio):
    data = build(sample=6, noise_per_evidence=ratio)
    n_ev = sum(len(evidence(docs)) for docs in by_owner(data.documents).values())
    n_noise = sum(1 for d in data.documents if d.meta.get("kind") == "noise")
    assert n_noise + n_ev == len(data.documents)
    assert abs(n_noise / n_ev - ratio) <= 0.1 * ratio + 0.05
    assert data.info["noise_ratio"] == pytest.approx(n_noise / n_ev)


def test_a_release_folder_is_refused(tmp_path):
    with pytest.raises(InputError, match="not public"):
        IbaBenchmark().build(sample=2, seed=1, source=tmp_path)


# --- judging and scoring --------------------------------------------------------------


def generate_instance():
    data = build(sample=6, scenarios=GENERATE)
    return next(i for i in data.instances if len(i.gold["checkpoints"]) >= 2)


def text_output(inst, status="ok", text="A plan."):
    return AgentOutput(inst.instance_id, "agent", 0, text, status=status)


def test_judge_yes_no_garbage_and_failed():
    inst = generate_instance()
    n = len(inst.gold["checkpoints"])
    yes = ScriptedChat('{"verdict": true, "reason": "fits"}', name="j")
    judgments, score = judge_and_score(inst, text_output(inst), JudgeBinding("j", yes, repeat=2))
    assert [j.score for j in judgments] == [1.0] * n and score.value == 100.0
    assert {(j.judge, j.judge_repeat, j.kind) for j in judgments} == {("j", 2, "checkpoint")}
    assert all(c["repeat"] == 2 and c["json_schema"] for c in yes.calls)
    assert inst.gold["checkpoints"][0]["statement"] in yes.calls[0]["messages"][-1]["content"]

    _, score = judge_and_score(inst, text_output(inst), JudgeBinding("j", ScriptedChat("No, it does not.")))
    assert score.value == 0.0 and score.n_unscored == 0

    judgments, score = judge_and_score(inst, text_output(inst), JudgeBinding("j", ScriptedChat("hmm, maybe")))
    assert all(j.status == "unscored" and j.score is None and j.raw == "hmm, maybe" for j in judgments)
    assert score.value is None and score.n_unscored == n

    mixed = ScriptedChat(['{"verdict": false, "reason": "x"}'] + ["I cannot tell"] * n)
    _, score = judge_and_score(inst, text_output(inst), JudgeBinding("j", mixed))
    assert score.value == 0.0 and score.n_items == n and score.n_unscored == n - 1  # unscored excluded, not zero

    judgments, score = judge_and_score(inst, text_output(inst), JudgeBinding("j", ScriptedChat(None)))
    assert all(j.status == "failed" and j.score is None for j in judgments) and score.value is None


def test_invalid_agent_output_scores_zero_without_asking_the_judge():
    inst = generate_instance()
    judge = ScriptedChat('{"verdict": true, "reason": "fits"}')
    judgments, score = judge_and_score(inst, text_output(inst, status="invalid", text=""), JudgeBinding("j", judge))
    assert judge.calls == [] and score.value == 0.0
    assert all(j.status == "scored" and "invalid" in j.feedback for j in judgments)


def api_instance():
    return build(sample=3, scenarios=["Ticket booking"]).instances[0]


def test_slot_scorer_excludes_task_fixed_slots_and_normalizes():
    inst = api_instance()
    fixed = inst.payload["api"]["task_fixed"]
    wrong_fixed = {name: "nowhere" for name in fixed}
    gold = inst.gold["slots"]
    loud = {k: f"  {v.upper().replace('_', ' ')} " for k, v in gold.items()}
    out = AgentOutput(inst.instance_id, "agent", 0, "", parsed={**wrong_fixed, **loud})
    judgments, score = judge_and_score(inst, out)
    assert {j.item_id for j in judgments} == set(gold) and not set(fixed) & {j.item_id for j in judgments}
    assert score.value == 100.0 and {j.judge for j in judgments} == {"iba.slots"}

    first = next(iter(gold))
    allowed = next(s["values"] for s in inst.payload["api"]["slots"] if s["name"] == first)
    other = next(v for v in allowed if v != gold[first])
    _, score = judge_and_score(inst, replace(out, parsed={**gold, first: other}))
    assert score.value == pytest.approx(100.0 * (len(gold) - 1) / len(gold))

    judgments, score = judge_and_score(inst, replace(out, parsed=None, status="invalid", text="oops"))
    assert score.value == 0.0 and all("invalid" in j.feedback for j in judgments)


# --- agents ---------------------------------------------------------------------------


def first_allowed(messages):
    """A weak backbone: the first allowed value of every field listed in the prompt."""
    fields = re.findall(r"^- (\w+): (\w+)", messages[-1]["content"], re.M)
    return "{" + ", ".join(f'"{k}": "{v}"' for k, v in fields) + "}"


def mean_score(data, agent, ctx):
    values = []
    for inst in data.instances:
        out = asyncio.run(agent.act(inst.public(), ctx, 0, "a"))
        values.append(judge_and_score(inst, out)[1].value)
    return sum(values) / len(values)


def test_oracle_beats_no_history_on_call_api():
    bench = IbaBenchmark({"noise_per_evidence": 4, "scenarios": CALL_API, "dynamic_rate": 0.5})
    data = bench.build(sample=12, seed=42, source=None)
    calls: list = []
    oracle = mean_score(data, IbaOracleAgent(), context(data, calls=calls))
    weak = ScriptedChat(first_allowed)
    blind = mean_score(data, RagAgent({"top_k": 0}), context(data, weak, calls))
    assert oracle == 100.0
    assert blind < 70.0
    assert calls == []  # neither reference agent retrieved anything
    assert len(weak.calls) == 12 and all(c["json_schema"]["properties"] for c in weak.calls)


def test_oracle_follows_the_latest_value_of_a_dynamic_preference():
    data = build(sample=8, scenarios=["Food ordering"], dynamic_rate=1.0)
    inst = next(i for i in data.instances if i.gold["n_dynamic"])
    out = asyncio.run(IbaOracleAgent().act(inst.public(), context(data), 0, "oracle"))
    assert out.parsed["spice_level"] == inst.gold["slots"]["spice_level"]
    assert out.parsed["restaurant"] == inst.payload["api"]["task_fixed"]["restaurant"]
    gen = build(sample=2, scenarios=["Weekly plan"]).instances[0]
    text = asyncio.run(IbaOracleAgent().act(gen.public(), context(build(sample=2, scenarios=["Weekly plan"])), 0, "o")).text
    assert len(text.splitlines()) == 1 + gen.payload["n_constraints"]


def test_rag_agent_retrieves_top_k_and_parses_slots():
    data = build(sample=2, scenarios=["Appointment registration"])
    inst = data.instances[0]
    calls: list = []
    llm = ScriptedChat(lambda m: '```json\n{"visit_mode": "Video", "time_of_day": "evening", "reminder": "pigeon"}\n```')
    out = asyncio.run(RagAgent().act(inst.public(), context(data, llm, calls), 1, "rag"))
    assert calls == [(inst.user_id, inst.query, 3)]
    assert len(out.trace[0]["passages"]) == 3 and "score" in out.trace[0]["passages"][0]
    assert out.trace[0]["passages"][0]["text"][:40] in llm.calls[0]["messages"][-1]["content"]
    assert out.status == "ok" and out.parsed["visit_mode"] == "video" and out.parsed["reminder"] == "pigeon"
    assert out.parsed["department"] == inst.payload["api"]["task_fixed"]["department"]
    assert "doctor_choice" not in out.parsed and (out.prompt_tokens, out.completion_tokens) == (10, 5)
    assert llm.calls[0]["repeat"] == 1
    assert llm.calls[0]["json_schema"]["properties"]["reminder"]["enum"] == ["sms", "email", "phone_call"]


def test_rag_agent_invalid_and_failed_answers():
    data = build(sample=2, scenarios=["Food ordering"])
    inst = data.instances[0]
    out = asyncio.run(RagAgent().act(inst.public(), context(data, ScriptedChat("Sure, I ordered it!")), 0, "rag"))
    assert out.status == "invalid" and out.text == "Sure, I ordered it!" and out.parsed is None
    out = asyncio.run(RagAgent().act(inst.public(), context(data, ScriptedChat(None)), 0, "rag"))
    assert out.status == "failed" and out.error
    gen = build(sample=2, scenarios=["Weekly plan"])
    out = asyncio.run(RagAgent().act(gen.instances[0].public(), context(gen, ScriptedChat("Monday: ...")), 0, "rag"))
    assert out.status == "ok" and out.text == "Monday: ..." and out.parsed is None


def test_agent_configs_and_registration():
    from perseval.kernel import registry

    cfgs = {n: load_config(AgentConfig, shipped_config("agents", n)) for n in ("iba-rag", "iba-no-history", "iba-oracle")}
    assert {c.name for c in cfgs.values()} == set(cfgs)
    assert cfgs["iba-no-history"].params["top_k"] == 0 and cfgs["iba-rag"].params["top_k"] == 3
    assert registry.agent_class(cfgs["iba-rag"].kind) is RagAgent
    assert registry.agent_class(cfgs["iba-oracle"].kind) is IbaOracleAgent
    assert registry.benchmark_class("iba") is IbaBenchmark
    assert (IbaBenchmark.headline_metric, IbaBenchmark.group_label) == ("score", "domain")
    assert (IbaBenchmark.llm_judges, IbaBenchmark.rule_judges) == (("iba.checkpoint",), ("iba.slots",))
    assert IbaOracleAgent().requires() == {"documents"} and not IbaOracleAgent.reads_gold
    # the no-history agent needs no retrieval, so no retriever reaches its run key
    assert RagAgent(cfgs["iba-no-history"].params).requires() == {"llm", "request_format"}
    assert RagAgent(cfgs["iba-rag"].params).requires() == {"llm", "request_format", "retrieve"}


def test_oracle_reads_combined_evidence_turns_in_table2_mode():
    # table2 mode packs several dimensions into one evidence turn: the oracle must read them all
    bench = IbaBenchmark({"noise_per_evidence": 2, "distribution": "table2", "dynamic_rate": 0.5})
    data = bench.build(sample=60, seed=5, source=None)
    combined = [d for d in data.documents if len(d.meta.get("supports", [])) > 1]
    assert combined, "the fixture must contain combined evidence turns"
    api = [i for i in data.instances if i.payload["action_type"] == "call_api"]
    assert api
    sub = type(data)(api, data.documents, {})
    assert mean_score(sub, IbaOracleAgent(), context(data)) == 100.0


def test_oracle_answers_a_qa_probe_in_text():
    from perseval.benchmarks.iba.qa import make_qa_probes

    bench = IbaBenchmark({"noise_per_evidence": 2, "scenarios": ["Food ordering"]})
    data = bench.build(sample=1, seed=3, source=None)
    probe = make_qa_probes(data.instances)[0]
    out = asyncio.run(IbaOracleAgent().act(probe.public(), context(data), 0, "oracle"))
    assert out.status == "ok" and out.parsed is None
    gold = data.instances[0].gold["slots"]
    scenario = load_taxonomy().scenario("Food ordering")
    for slot in scenario.api.personal_slots:  # every preferred value is stated by its label
        label = scenario.dimension(slot.dimension).value(gold[slot.name]).label
        assert label in out.text
