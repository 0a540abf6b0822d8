"""The settings a Bespoke paper config needs beyond the CPU defaults: a stated truncation policy for
histories over their budget, the profiler role (served by the flow like a backbone), every gold claim in
the gold-information setting, and E_p's official shot count, answer layout and uncapped feedback; and the
new params leave the keys of configs that do not set them where they were."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from perseval.agents.base import AgentContext
from perseval.benchmarks.bespoke.agents.responder import BespokeResponder, ResponderParams
from perseval.benchmarks.bespoke.analysis import requests_table
from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark
from perseval.benchmarks.bespoke.evaluation import EvaluatorParams
from perseval.benchmarks.bespoke.judges.criteria import CriteriaJudge
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.benchmarks.bespoke.truncation import HistoryOverBudget, fit_history
from perseval.experiment.load import judge_specs
from perseval.experiment.load import load_experiment
from perseval.core.errors import ConfigError
from perseval.pipeline.freshness import pending
from perseval.judges.base import JudgeBinding
from perseval.llm.endpoint import Endpoint
from perseval.llm.identity import identity_label
from perseval.kernel.params import EVERY_FIELD
from perseval.pipeline.plan import make_plan, run_key
from perseval.pipeline.units import shards
from perseval.core.instances import AgentOutput, Document
from perseval.retrieval.search import make_search
from perseval.pipeline.stages import Runtime, construct, data_manifest, run_shard
from perseval.core.store import StageStore
from tests.http_stub import JsonHandler, completion, serve
from tests.scripted import ScriptedChat
from tests.bespoke_scripted import answer, context

from .conftest import CONFIGS, copy_configs
from perseval.experiment.load import experiment_file


@pytest.fixture(scope="module")
def data():
    return BespokeBenchmark().build(sample=3, seed=5, source=None)


def doc(i: str, source: str, n: int) -> Document:
    return Document("u", i, i[0] * n, meta={"source": source})


# --- truncation ---------------------------------------------------------------------------------------

def test_oldest_first_keeps_each_sources_newest_sessions_within_its_share() -> None:
    sessions = [doc("a1", "chat", 100), doc("b2", "chat", 100), doc("c3", "chat", 100),
                doc("x1", "search", 50), doc("y2", "search", 50)]
    kept, cut = fit_history(sessions, 200, "oldest_first")
    # chats hold 300 of 400 characters: a share of 150 keeps c3 only; searches' share of 50 keeps y2
    assert [d.doc_id for d in kept] == ["c3", "y2"]
    assert all(d.text == s.text for d in kept for s in sessions if s.doc_id == d.doc_id)  # whole sessions
    assert (cut.sessions, cut.sessions_dropped, cut.chars, cut.chars_cut) == (5, 3, 400, 250)
    whole, none_cut = fit_history(sessions, 400, "oldest_first")
    assert whole == sessions and (none_cut.sessions_dropped, none_cut.chars_cut) == (0, 0)


def test_a_newest_session_over_its_share_keeps_its_beginning_and_error_refuses() -> None:
    long = Document("u", "c", "x" * 700 + "y" * 300, meta={"source": "chat"})
    kept, cut = fit_history([long], 300, "oldest_first")
    assert kept[0].text == "x" * 300 + " [...]" and long.text.startswith("x" * 700)  # the input is not changed
    assert (cut.sessions_dropped, cut.chars_cut) == (0, 700)
    with pytest.raises(HistoryOverBudget, match="1000 characters in 1 sessions, over its budget of 300"):
        fit_history([long], 300, "error")
    assert fit_history([long], 1000, "error")[0] == [long]  # within the budget: nothing to refuse


def test_the_profiler_sees_the_fitted_history_and_the_trace_says_what_was_cut(data) -> None:
    inst = data.instances[0]
    history = [d for d in data.documents if d.owner == inst.user_id]
    llm = ScriptedChat(answer)
    out = asyncio.run(BespokeResponder({"user_context": "profile", "profile_history_chars": 1000,
                                        "history_truncation": "oldest_first"}).act(
        inst.public(), context(data, llm), 0, "a"))
    prompt = next(c["messages"][-1]["content"] for c in llm.calls if "<chat history>" in c["messages"][-1]["content"])
    shown = [d for d in history if d.text.strip() in prompt]
    assert 0 < sum(len(d.text.strip()) for d in shown) <= 1000
    for source in ("chat", "search"):  # both sources kept, each a run of its newest sessions
        mine = [d.doc_id for d in history if d.meta["source"] == source]
        kept = [d.doc_id for d in shown if d.meta["source"] == source]
        assert kept and kept == mine[len(mine) - len(kept):]
    record = next(t for t in out.trace if t["step"] == "context")
    total = sum(len(d.text.strip()) for d in history)
    assert record["truncation"]["policy"] == "oldest_first"
    assert record["truncation"]["sessions_dropped"] == len(history) - len(shown)
    assert record["chars_cut"] == total - sum(len(d.text.strip()) for d in shown)
    assert out.status == "ok"
    table = requests_table(pd.DataFrame([{"agent": "a", "backbone": "b", "trace": out.trace, "status": out.status}]))
    row = table.iloc[0]
    assert (row["histories_cut"], row["history_chars_cut"]) == (1, record["chars_cut"])


def test_an_over_budget_history_under_error_fails_the_output_with_its_size(data) -> None:
    llm = ScriptedChat(answer)
    out = asyncio.run(BespokeResponder({"user_context": "raw", "query_aware": True, "history_selection": "llm",
                                        "history_chars": 50, "history_truncation": "error"}).act(
        data.instances[0].public(), context(data, llm), 0, "a"))
    assert out.status == "failed" and "over its budget of 50" in out.error
    assert not any("<chat history>" in c["messages"][-1]["content"] for c in llm.calls)


# --- the profiler role ------------------------------------------------------------------------------

def test_profiles_and_selection_go_to_the_profiler_and_the_answer_to_the_backbone(data) -> None:
    inst = data.instances[0]
    history = [d for d in data.documents if d.owner == inst.user_id]
    backbone, profiler = ScriptedChat(answer, name="backbone"), ScriptedChat(answer, name="profiler")
    ctx = context(data, backbone)
    ctx.roles = {"profiler": profiler}
    agent = BespokeResponder({"user_context": "profile", "query_aware": True, "history_selection": "llm",
                              "profiler_model": "some-model"})
    assert agent.role_models() == {"profiler": "some-model"}
    out = asyncio.run(agent.act(inst.public(), ctx, 0, "a"))
    assert len(profiler.calls) == len(history) + 1  # one selection per session, then the profile
    assert len(backbone.calls) == 1 and "PROFILE: wants plain words" in backbone.calls[0]["messages"][-1]["content"]
    row = requests_table(pd.DataFrame([{"agent": "a", "backbone": "b", "trace": out.trace, "status": "ok"}])).iloc[0]
    assert (row["llm_calls"], row["profiler_calls"]) == (1, len(history) + 1)
    requests = next(t for t in out.trace if t["step"] == "requests")
    assert (requests["llm_calls"], requests["profiler_calls"], requests["profiler"]) == (1, len(history) + 1,
                                                                                         "profiler")
    with pytest.raises(RuntimeError, match="was not served"):
        asyncio.run(agent.act(inst.public(), context(data, ScriptedChat(answer)), 0, "a"))
    with pytest.raises(ConfigError, match="profiler_model"):
        BespokeResponder({"user_context": "none", "profiler_model": "some-model"})


def _experiment(root: Path, profiler: str | None) -> Path:
    """The shipped configs plus two API models behind one stub endpoint and a Bespoke experiment whose
    responder writes query-aware profiles (no search, no retriever)."""
    cfg = root / "configs"
    copy_configs(cfg)
    for name in ("stub-backbone", "stub-profiler"):
        (cfg / "models" / f"{name}.yaml").write_text(yaml.safe_dump(
            {"name": name, "format": "api", "source": name, "deployment": "stub-endpoint",
             "sampling": {"temperature": 0.0, "max_tokens": 16}}))
    (cfg / "deployments" / "stub-endpoint.yaml").write_text(yaml.safe_dump(
        {"name": "stub-endpoint", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "retries": 0}))
    (cfg / "judges" / "stub-judge.yaml").write_text(yaml.safe_dump({"name": "stub-judge", "model": "stub-backbone"}))
    params = {"user_context": "profile", "query_aware": True, "search": "none", "search_k": 0,
              **({"profiler_model": profiler} if profiler else {})}
    (cfg / "agents" / "profiled.yaml").write_text(yaml.safe_dump(
        {"name": "profiled", "kind": "bespoke.responder", "params": params}))
    exp = {"name": "profiled", "seed": 3, "shard_size": 2, "backbones": ["stub-backbone"], "retrievers": [],
           "judges": ["stub-judge"], "benchmarks": [{"name": "bespoke", "sample": 2, "agents": ["profiled"]}]}
    (cfg / "experiments" / "profiled.yaml").write_text(yaml.safe_dump(exp))
    return cfg / "experiments" / "profiled.yaml"


def test_the_profiler_model_is_loaded_keyed_served_and_sent_its_requests(tmp_path) -> None:
    seen: list[dict] = []

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.request_json()
            seen.append(body)
            self.reply(200, completion("PROFILE-TEXT" if "<chat history>" in str(body["messages"]) else "answer"))

    exp = load_experiment(_experiment(tmp_path / "a", "stub-profiler"))
    assert set(exp.models) == {"stub-backbone", "stub-profiler"}  # loaded though it is no backbone or judge
    plan = make_plan(exp)
    (unit,) = plan.runs()
    assert unit.backbone == "stub-backbone" and set(unit.roles) == {"profiler"}
    without_roles = run_key(unit.data.key, None, unit.agent, unit.model, unit.repeats, unit.seed)
    assert unit.key != without_roles  # the profiler's identity keys the run, not only its name
    plain = make_plan(load_experiment(_experiment(tmp_path / "b", None))).runs()[0]
    assert plain.roles == {} and plain.key != unit.key
    root, cache = str(tmp_path / "runs"), str(tmp_path / "cache.sqlite")
    construct(plan.data[0], Runtime(root, "r", cache, 2))
    todo = pending(root, plan, {plan.data[0].key: data_manifest(root, plan.data[0].key, 2).shard_ids})
    assert todo.models(plan) == {"stub-backbone", "stub-profiler"}  # served for the pending run
    with serve(Handler) as url:
        endpoints = {m: Endpoint(m, "openai", f"{url}/v1", f"served-{m}", identity_label(exp.models[m]), None, 4,
                                 10.0, 0) for m in exp.models}
        run_shard(unit, 0, Runtime(root, "r", cache, 2, endpoints=endpoints))
    profile_models = {b["model"] for b in seen if "<chat history>" in str(b["messages"])}
    answer_models = {b["model"] for b in seen if "<chat history>" not in str(b["messages"])}
    assert profile_models == {"served-stub-profiler"} and answer_models == {"served-stub-backbone"}
    outputs = StageStore(root, "run", unit.key).read_part(0, AgentOutput)
    assert outputs and all("PROFILE-TEXT" in next(t for t in o.trace if t["step"] == "context")["text"]
                           for o in outputs)


# --- the gold-information setting ---------------------------------------------------------------------

def test_search_k_null_gives_every_gold_claim(data) -> None:
    inst = data.instances[0]
    claims = inst.gold["claims"]
    assert len(claims) > 3
    llm = ScriptedChat(answer)
    ctx = AgentContext(llm=llm, search=make_search("gold", has_corpus=False, retrieve=lambda o, q, k: [],
                                                   gold_of=lambda iid: inst.gold))
    asyncio.run(BespokeResponder({"search": "gold", "search_k": None}).act(inst.public(), ctx, 0, "a"))
    assert all(c in llm.calls[-1]["messages"][-1]["content"] for c in claims)
    with pytest.raises(ConfigError, match="search: gold only"):
        BespokeResponder({"search": "corpus", "search_k": None})


# --- E_p: shots, layout, feedback -----------------------------------------------------------------------

LONG = "This misses the budget angle I care about most, " * 8  # ~400 characters of feedback


def test_official_layout_six_shots_and_whole_feedback(data) -> None:
    inst = data.instances[0]
    assert len(inst.gold["shots"]) >= 6
    reply = "<think>step by step... Tone Score: 1</think>\n" + "\n".join(
        f"{t} Score: {s}\n{t} Feedback: {LONG}" for t, s in
        zip(("Need Alignment", "Content Depth", "Tone", "Explanation Style"), (2, 3, 4, 5)))
    model = ScriptedChat(reply)
    judge = CriteriaJudge({"max_shots": 6, "answer_format": "reason_then_score"})
    assert judge.params.answer_format == "fields" and judge.params.feedback_chars is None
    judgments = asyncio.run(judge.judge(inst, AgentOutput(inst.instance_id, "a", 0, "a response"),
                                        JudgeBinding("j", model)))
    call = model.calls[0]
    prompt = call["messages"][-1]["content"]
    assert "[Example 6]" in prompt and "[Example 7]" not in prompt
    assert all(s["contents"] in prompt for s in inst.gold["shots"][:6])
    assert "<think>" in prompt and "Need Alignment Score: [1-5]" in prompt
    assert call["json_schema"] is None and call["max_tokens"] == 1024
    by_item = {j.item_id: j for j in judgments}
    assert {c: by_item[c].score for c in CRITERIA} == dict(zip(CRITERIA, (2.0, 3.0, 4.0, 5.0)))
    assert all(by_item[c].feedback == LONG.strip() for c in CRITERIA)  # never cut to 200 characters


def test_json_feedback_is_capped_at_200_by_default_and_uncapped_on_request(data) -> None:
    inst = data.instances[0]
    reply = json.dumps({c: {"score": 3, "feedback": LONG} for c in CRITERIA})

    def schema_of(params: dict) -> tuple[dict, int, list]:
        model = ScriptedChat(reply)
        judgments = asyncio.run(CriteriaJudge(params).judge(inst, AgentOutput(inst.instance_id, "a", 0, "r"),
                                                            JudgeBinding("j", model)))
        return model.calls[0]["json_schema"], model.calls[0]["max_tokens"], judgments

    capped, capped_tokens, _ = schema_of({})
    assert {capped["properties"][c]["properties"]["feedback"]["maxLength"] for c in CRITERIA} == {200}
    free, free_tokens, judgments = schema_of({"feedback_chars": None})
    assert all("maxLength" not in free["properties"][c]["properties"]["feedback"] for c in CRITERIA)
    assert free_tokens == 1024 > capped_tokens
    assert {j.feedback for j in judgments if j.item_id in CRITERIA} == {LONG}
    with pytest.raises(ConfigError, match="feedback_chars"):
        CriteriaJudge({"answer_format": "reason_then_score", "feedback_chars": 300})


# --- keys -------------------------------------------------------------------------------------------

def test_new_params_at_their_defaults_leave_the_dump_and_so_the_keys_as_they_were() -> None:
    default = ResponderParams().model_dump(mode="json")
    assert not {"history_truncation", "profiler_model"} & set(default)
    shown = ResponderParams().model_dump(mode="json", context=EVERY_FIELD)  # what `perseval show` prints
    assert (shown["history_truncation"], shown["profiler_model"]) == ("share", None)
    assert EvaluatorParams().model_dump(mode="json", context=EVERY_FIELD)["feedback_chars"] == 200
    assert ResponderParams(history_truncation="oldest_first").model_dump(mode="json")["history_truncation"] == \
        "oldest_first"
    assert "feedback_chars" not in EvaluatorParams().model_dump(mode="json")
    assert EvaluatorParams(feedback_chars=None).model_dump(mode="json")["feedback_chars"] is None
    # scores_only with the release's rubric means something new (it derived before): it gets a new key
    assert "feedback_chars" in EvaluatorParams(variant="scores_only").model_dump(mode="json")
    assert "feedback_chars" not in EvaluatorParams(variant="scores_only", rubric="derive").model_dump(mode="json")
    # a dump validates back to the same params (judge specs are dumped, then built from the dump)
    for p in (ResponderParams(), EvaluatorParams(variant="scores_only"), EvaluatorParams(answer_format="fields")):
        assert type(p).model_validate(p.model_dump(mode="json")) == p


# --- the paper config's effective settings -----------------------------------------------------------

def test_the_paper_config_profiles_with_the_profiler_and_judges_as_the_official_evaluator(tmp_path,
                                                                                          monkeypatch) -> None:
    shutil.copytree(Path(__file__).parent / "data" / "bespoke_sample", tmp_path / "data" / "bespoke")
    monkeypatch.chdir(tmp_path)
    exp = load_experiment(experiment_file("bespoke_paper"))
    plan = make_plan(exp)
    responders = [r for r in plan.runs() if r.agent.kind == BespokeResponder.kind]
    assert responders
    for run in responders:
        p = run.agent.params
        makes_context = p.user_context == "profile" or p.history_selection == "llm"
        assert set(run.roles) == ({"profiler"} if makes_context else set())
        assert all(m.name == "qwen3-30b-a3b-instruct" for m in run.roles.values())
        assert p.max_tokens == 4096 and p.search_chars is None
        assert p.user_context == "none" or p.history_truncation == "oldest_first"  # no silent overflow
    gold = next(r.agent.params for r in responders if r.agent.params.search == "gold")
    assert gold.search_k is None
    (criteria,) = [s for i in range(len(exp.experiment.benchmarks)) for s in judge_specs(exp, i)
                   if "bespoke.criteria" in s.kinds]
    ep = criteria.params["bespoke.criteria"]
    assert (ep.max_shots, ep.answer_format, ep.feedback_chars, ep.rubric) == (6, "fields", None, "release")
    meta = [r.agent.params for r in plan.runs() if r.agent.kind == "bespoke.evaluator"]
    assert {m.variant for m in meta} == {"none", "scores_only", "feedback"}
    assert {(m.max_shots, m.answer_format, m.feedback_chars, m.rubric) for m in meta} == {(6, "fields", None,
                                                                                           "release")}
