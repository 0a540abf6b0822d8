"""Bespoke's protocol with scripted models: what E_p and the recall judge see, the user-context settings'
selection and traces, the gold-information setting, the meta-evaluation and history retrieval pieces, and
the metric arithmetic (x20, Avg., Pearson/Spearman, nDCG@k) against hand-computed values."""
from __future__ import annotations

import asyncio
import json
import math

import pandas as pd
import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import build_all
from perseval.benchmarks.bespoke.agents.evaluator import BespokeEvaluator
from perseval.benchmarks.bespoke.agents.history_retriever import HistoryRetriever
from perseval.benchmarks.bespoke.agents.responder import BespokeResponder, ResponderParams
from perseval.benchmarks.bespoke.analysis import gold_pairs, table4
from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark
from perseval.benchmarks.bespoke.evaluation import EvaluatorParams, ep_messages, parse_fields
from perseval.benchmarks.bespoke.history_benchmark import BespokeHistoryBenchmark
from perseval.benchmarks.bespoke.history_retrieval import ndcg_at
from perseval.benchmarks.bespoke.judges.criteria import CriteriaJudge
from perseval.benchmarks.bespoke.judges.evaluator_scores import EvaluatorScores
from perseval.benchmarks.bespoke.judges.feedback_match import FeedbackMatchJudge
from perseval.benchmarks.bespoke.judges.recall import RecallJudge
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.benchmarks.bespoke.meta_analysis import correlations, table3
from perseval.benchmarks.bespoke.meta_benchmark import BespokeMetaBenchmark
from perseval.benchmarks.bespoke.stats import shannon_equitability
from perseval.judges.base import JudgeBinding
from perseval.core.instances import AgentOutput, Instance, Passage
from perseval.pipeline.runner import judge_shard, score_outputs
from tests.scripted import ScriptedChat
from tests.bespoke_scripted import answer, context

@pytest.fixture(scope="module")
def data():
    return BespokeBenchmark().build(sample=3, seed=5, source=None)


def run(agent, inst, ctx) -> AgentOutput:
    return asyncio.run(agent.act(inst.public(), ctx, 0, "a"))


# --- user-context settings ---------------------------------------------------------------------------

def test_selected_settings_pass_only_the_selected_sessions(data) -> None:
    inst = data.instances[0]
    for form in ("raw", "profile"):
        llm = ScriptedChat(answer)
        out = run(BespokeResponder({"user_context": form, "query_aware": True, "history_selection": "llm",
                                    "history_chars": None}), inst, context(data, llm))
        steps = {t["step"]: t for t in out.trace}
        decisions = steps["history"]["decisions"]
        history = [d for d in data.documents if d.owner == inst.user_id]
        assert len(decisions) == len(history)  # one (query, session) judgment per session
        kept = [d["doc_id"] for d in decisions if d["keep"]]
        assert 0 < len(kept) < len(history) and steps["context"]["sessions"] == kept
        by_id = {d.doc_id: d for d in history}
        select_calls = [c for c in llm.calls if '{"keep"' in c["messages"][-1]["content"]]
        assert len(select_calls) == len(history)
        for d in history:  # a search session is judged on its query string only (Table 20)
            prompt = next(c["messages"][-1]["content"] for c in select_calls if f"<session>\n" in
                          c["messages"][-1]["content"] and by_id[d.doc_id].meta.get("search_query", d.text)
                          in c["messages"][-1]["content"])
            if d.meta["source"] == "search":
                assert d.meta["visits"][0]["summary"] not in prompt
        final = llm.calls[-1]["messages"][-1]["content"]
        shown = [d for d in history if d.text.strip() in (steps["context"]["text"] if form == "raw" else
                                                          next(c["messages"][-1]["content"] for c in llm.calls
                                                               if "<chat history>" in c["messages"][-1]["content"]))]
        assert {d.doc_id for d in shown} == set(kept)  # no unselected session reaches the model
        if form == "profile":
            assert "PROFILE: wants plain words" in final
        assert steps["requests"]["llm_calls"] == len(history) + (2 if form == "profile" else 1)


def test_static_profile_is_one_request_per_user(data) -> None:
    llm = ScriptedChat(answer)
    agent = BespokeResponder({"user_context": "profile"})
    ctx = context(data, llm)
    same_user = [i for i in data.instances if i.user_id == data.instances[0].user_id]
    assert len(same_user) >= 2

    async def both():
        return await asyncio.gather(*(agent.act(i.public(), ctx, 0, "a") for i in same_user))

    outs = asyncio.run(both())
    profile_calls = [c for c in llm.calls if "<chat history>" in c["messages"][-1]["content"]]
    assert len(profile_calls) == 1  # shared by the user's concurrent queries (the request cache does the rest)
    texts = {next(t for t in o.trace if t["step"] == "context")["text"] for o in outs}
    assert len(texts) == 1 and "<query>" not in profile_calls[0]["messages"][-1]["content"]


def test_gold_information_setting_passes_no_search_results(data) -> None:
    inst = data.instances[0]
    claims = inst.gold["claims"]
    gold = [Passage(f"gold-{i}", 0, c, 1.0) for i, c in enumerate(claims)]
    llm = ScriptedChat(answer)
    agent = BespokeResponder({"user_context": "profile", "query_aware": True, "history_selection": "llm",
                              "search": "gold", "search_k": 10})
    out = run(agent, inst, context(data, llm, search_results=gold))
    search = next(t for t in out.trace if t["step"] == "search")
    assert search["backend"] == "gold" and all(r["doc_id"].startswith("gold-") for r in search["results"])
    final = llm.calls[-1]["messages"][-1]["content"]
    assert all(c in final for c in claims) and "CORPUS PASSAGE" not in final


def test_failed_profile_fails_the_output(data) -> None:
    llm = ScriptedChat(lambda m: None if "<chat history>" in m[-1]["content"] else "answer")
    out = run(BespokeResponder({"user_context": "profile"}), data.instances[0], context(data, llm))
    assert out.status == "failed" and "profile request failed" in out.error


# --- what the judges see -------------------------------------------------------------------------------

def test_ep_sees_five_shots_and_the_whole_response_by_default(data) -> None:
    inst = data.instances[0]
    long = "word " * 4000
    messages, clip = ep_messages(EvaluatorParams(), inst.query, inst.gold["need"], inst.gold["rubric"],
                                 inst.gold["shots"], long)
    text = messages[-1]["content"]
    assert clip.total == 0 and long.strip() in text and inst.gold["rubric"] in text
    assert "[Example 5]" in text and "[Example 6]" not in text
    assert all(s["contents"] in text for s in inst.gold["shots"][:5])
    assert "Tone feedback:" in text


def test_budget_clips_shots_first_and_is_recorded(data) -> None:
    inst = data.instances[0]
    p = EvaluatorParams(prompt_budget_tokens=700)
    messages, clip = ep_messages(p, inst.query, inst.gold["need"], inst.gold["rubric"], inst.gold["shots"], "short")
    assert clip.shots > 0 and clip.response == 0 and "shots" in clip.describe()
    model = ScriptedChat(answer)
    judgments = asyncio.run(CriteriaJudge({"prompt_budget_tokens": 700}).judge(
        inst, AgentOutput(inst.instance_id, "a", 0, "short"), JudgeBinding("j", model)))
    clipped = [j for j in judgments if j.item_id == "clipped"]
    assert len(clipped) == 1 and clipped[0].score == clip.total and "token budget" in clipped[0].feedback
    scores = {s.metric: s for s in CriteriaJudge().score(inst, AgentOutput(inst.instance_id, "a", 0, "x"), judgments)}
    assert scores["clipped_chars"].value == clip.total and scores["tone"].value == 100.0


HUMAN = {c: {"score": 3, "feedback": ""} for c in CRITERIA}  # a meta-test instance's human ratings


def test_variants_see_what_table3_says(data) -> None:
    inst = data.instances[0]
    g = inst.gold
    generic, _ = ep_messages(EvaluatorParams(variant="none"), inst.query, g["need"], g["rubric"], g["shots"], "r")
    assert g["need"] not in generic[-1]["content"] and "<rubric>" not in generic[-1]["content"]
    assert "[Example" not in generic[-1]["content"]
    scores_only, _ = ep_messages(EvaluatorParams(variant="scores_only"), inst.query, g["need"], "derived", g["shots"], "r")
    assert "feedback:" not in scores_only[-1]["content"] and "Tone score:" in scores_only[-1]["content"]
    meta = Instance("m", "bespoke-meta", "u", "u", inst.query, {}, {**g, "response": "resp", "human": HUMAN})
    model = ScriptedChat(answer)
    out = asyncio.run(BespokeEvaluator({"variant": "scores_only", "rubric": "derive"}).act(
        meta, AgentContext(llm=model), 0, "e"))
    derive = model.calls[0]["messages"][-1]["content"]
    assert "BEGIN ANALYSIS" in derive and '"feedback"' not in derive  # rubric from score-only pairs (C.2)
    assert out.parsed["rubric"] == "Need alignment: 5 = everything asked"
    assert out.parsed["scores"] == dict(zip(CRITERIA, (4, 3, 5, 2)))


def test_table3_variants_share_one_rubric_source(data) -> None:
    """The personalized variants differ only in the examples' feedback: same rubric, same source."""
    g = data.instances[0].gold
    meta = Instance("m", "bespoke-meta", "u", "u", data.instances[0].query, {}, {**g, "response": "resp", "human": HUMAN})
    for source in ("release", "derive"):
        sent: dict[str, list[dict]] = {}
        for variant in ("feedback", "scores_only"):
            model = ScriptedChat(answer)
            out = asyncio.run(BespokeEvaluator({"variant": variant, "rubric": source}).act(
                meta, AgentContext(llm=model), 0, "e"))
            sent[variant] = model.calls
            expected = g["rubric"] if source == "release" else "Need alignment: 5 = everything asked"
            assert out.parsed["rubric"] == expected
            assert f"<rubric>\n{expected}\n</rubric>" in model.calls[-1]["messages"][-1]["content"]
        n_requests = {v: len(c) for v, c in sent.items()}
        assert n_requests == ({"feedback": 1, "scores_only": 1} if source == "release" else
                              {"feedback": 2, "scores_only": 2})  # derive: one rubric request before rating
        if source == "derive":  # each derives from the pairs it is shown
            assert '"feedback"' in sent["feedback"][0]["messages"][-1]["content"]
            assert '"feedback"' not in sent["scores_only"][0]["messages"][-1]["content"]


def test_official_field_answers_are_parsed() -> None:
    text = ("<think>tone is fine, maybe Tone Score: 1</think>\nNeed Alignment Score: 4\nNeed Alignment Feedback: "
            "good\nmulti line\nContent Depth Score: 6\nContent Depth Feedback: x\nTone Score: **5**\n"
            "Tone Feedback: warm\nExplanation Style Score: 3/5\nExplanation Style Feedback: ok")
    got = parse_fields(text)
    assert got["need_alignment"] == (4, "good\nmulti line") and got["content_depth"][0] is None
    assert got["tone"] == (5, "warm") and got["explanation_style"] == (3, "ok")


def test_recall_unparseable_claim_is_unscored_and_counted() -> None:
    inst = Instance("i", "bespoke", "u", "u", "q?", {}, {"need": "n", "claims": ["battery costs fell", "x", "y"]})
    model = ScriptedChat(lambda m: "hmm" if "Fact: y" in m[-1]["content"] else json.dumps(
        {"verdict": "Fact: battery" in m[-1]["content"], "reason": "r"}))
    out = AgentOutput("i", "a", 0, "resp " * 3000)
    judgments = asyncio.run(RecallJudge().judge(inst, out, JudgeBinding("j", model)))
    assert all(("resp " * 3000).strip() in c["messages"][-1]["content"] for c in model.calls)  # unclipped
    (score,) = RecallJudge().score(inst, out, judgments)
    assert score.value == 50.0 and (score.n_items, score.n_unscored) == (3, 1)
    cut = asyncio.run(RecallJudge({"prompt_budget_tokens": 300}).judge(inst, out, JudgeBinding("j", model)))
    assert [j.item_id for j in cut][-1] == "clipped" and cut[-1].score > 0


# --- meta-evaluation ------------------------------------------------------------------------------------

def test_meta_instances_judges_and_feedback_unscored() -> None:
    data = BespokeMetaBenchmark().build(sample=2, seed=5, source=None)
    assert len(data.instances) == 4 and data.instances[0].instance_id.endswith("-0")
    inst = data.instances[0]
    out = AgentOutput(inst.instance_id, "e", 0, "raw", parsed={
        "scores": dict(zip(CRITERIA, (4, None, 5, 2))), "feedback": {c: "fb" for c in CRITERIA}, "rubric": "r"})
    rule = EvaluatorScores()
    js = asyncio.run(rule.judge(inst, out, JudgeBinding("rule")))
    scores = {s.metric: s for s in rule.score(inst, out, js)}
    human = inst.gold["human"]
    assert scores["content_depth"].value is None and scores["content_depth"].n_unscored == 1
    expected = 20 * (abs(4 - human["need_alignment"]["score"]) + abs(5 - human["tone"]["score"])
                     + abs(2 - human["explanation_style"]["score"])) / 3
    assert scores["score_error"].value == pytest.approx(expected) and scores["tone"].value == 100.0
    meta = FeedbackMatchJudge()
    js = asyncio.run(meta.judge(inst, out, JudgeBinding("j", ScriptedChat(answer))))
    assert all(j.status == "unscored" and j.raw == "not json at all" for j in js)
    assert meta.score(inst, out, js)[0].value is None and meta.score(inst, out, js)[0].n_unscored == 4


def test_pearson_spearman_and_table3_by_hand() -> None:
    r, rho = correlations([1, 2, 3, 4], [1, 3, 2, 4])
    assert r == pytest.approx(0.8) and rho == pytest.approx(0.8)  # hand: cov 1.0 / var 1.25
    assert correlations([3, 3, 3], [1, 2, 3]) == (None, None) and correlations([1, 2], [1, 2]) == (None, None)
    human = [(1, 5), (2, 4), (4, 2), (5, 1)]  # (need alignment, tone) of four meta pairs
    insts = [Instance(f"m{k}", "bespoke-meta", "u", "u", "q", {}, {"need": "n", "response": "r", "human": {
        c: {"score": h[0] if c != "tone" else h[1], "feedback": ""} for c in CRITERIA}}) for k, h in enumerate(human)]
    rows = []
    for k, (na, _tone) in enumerate(human):
        for c in CRITERIA:
            rows.append({"agent": "ev", "backbone": "m", "agent_params": '{"variant": "feedback"}',
                         "instance_id": f"m{k}", "metric": c, "value": 20.0 * na})
        rows.append({"agent": "ev", "backbone": "m", "agent_params": '{"variant": "feedback"}',
                     "instance_id": f"m{k}", "metric": "feedback.tone", "value": 100.0 * (k % 2)})
    t = table3(pd.DataFrame(rows), insts, {"ev": EvaluatorParams(variant="feedback")}).set_index("Criterion")
    assert t.loc["Need alignment", "Pearson"] == pytest.approx(1.0)
    assert t.loc["Tone", "Spearman"] == pytest.approx(-1.0) and t.loc["Tone", "Feedback Acc."] == 0.5
    assert t.loc["Avg.", "Variant"] == "w/ Feedback" and pd.isna(t.loc["Avg.", "Feedback Acc."])  # tone only


# --- history retrieval ----------------------------------------------------------------------------------

def test_ndcg_against_a_hand_computed_case() -> None:
    # ranking a b c d, relevant {b, d, e}: DCG@3 = 1/log2(3); IDCG@3 = 1 + 1/log2(3) + 1/log2(4)
    expected = (1 / math.log2(3)) / (1 + 1 / math.log2(3) + 0.5)
    assert ndcg_at(["a", "b", "c", "d"], {"b", "d", "e"}, 3) == pytest.approx(expected)
    assert ndcg_at(["b", "d", "e"], {"b", "d", "e"}, 10) == pytest.approx(1.0)
    assert ndcg_at(["a", "c"], {"b"}, 10) == 0.0 and ndcg_at(["a"], set(), 10) is None  # unranked: no credit
    assert ndcg_at(["b"], {"b", "e"}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # DCG@4 of a b c d = 1/log2 3 + 1/log2 5; IDCG@4 over three relevant
    expected4 = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 0.5)
    assert ndcg_at(["a", "b", "c", "d"], {"b", "d", "e"}, 4) == pytest.approx(expected4)


def test_history_oracle_is_labelled_at_build_with_the_gold_rubric() -> None:
    model = ScriptedChat(answer)
    data = build_all(BespokeHistoryBenchmark(), sample=2, seed=5, source=None, models={"oracle": model})
    inst = data.instances[0]
    sessions = [d for d in data.documents if d.owner == inst.user_id]
    assert inst.instance_id.startswith("bespoke-history-") and len(inst.gold["oracle_decisions"]) == len(sessions)
    assert inst.gold["oracle"] and all("<rubric>" in c["messages"][-1]["content"] for c in model.calls)
    assert sum(inst.gold["rubric"] in c["messages"][-1]["content"] for c in model.calls) == len(sessions)
    llm = ScriptedChat("expanded aspects")
    out = run(HistoryRetriever({"expansion": "cot", "depth": 5}), inst, context(data, llm))
    assert out.text == f"{inst.query}\nexpanded aspects" and len(out.parsed["ranking"]) == 5
    assert "step by step" in llm.calls[0]["messages"][-1]["content"]


# --- tables -----------------------------------------------------------------------------------------------

def _score_rows(agent: str, params: dict, values: dict[str, float]) -> list[dict]:
    return [{"backbone": "m", "agent": agent, "retriever": "minilm", "judge": "j", "agent_params": json.dumps(params),
             "instance_id": "i1", "metric": m, "value": v, "n_unscored": 1 if m == "recall" else 0}
            for m, v in values.items()]


def test_table4_avg_is_the_mean_of_five_columns_and_figure4_pairs() -> None:
    base = {"user_context": "profile", "query_aware": True, "history_selection": "llm"}
    vals = {"need_alignment": 60, "content_depth": 40, "tone": 80, "explanation_style": 60, "recall": 10}
    gold_vals = {**vals, "need_alignment": 80}
    agents = {"sel": {**base, "search": "corpus"}, "gold": {**base, "search": "gold"}, "none": {"user_context": "none"}}
    frame = pd.DataFrame(_score_rows("sel", agents["sel"], vals) + _score_rows("gold", agents["gold"], gold_vals)
                         + _score_rows("none", agents["none"], vals))
    typed = {a: ResponderParams.model_validate(p) for a, p in agents.items()}
    t = table4(frame, typed).set_index("Agent")
    assert t.loc["sel", "Avg."] == pytest.approx(50.0) and t.loc["gold", "Avg."] == pytest.approx(54.0)
    assert t.loc["sel", "Recall unscored claims"] == 1
    assert tuple(t.loc["sel", ["History Usage", "Query Awareness", "History Selection", "User Context"]]) == \
        ("✓", "✓", "✓ (LLM)", "Profile")
    assert t.loc["none", "User Context"] == "✗"
    pairs = gold_pairs(t.reset_index(), typed)
    assert set(pairs["Setting"]) == {"Personalized", "Personalized + Gold Information"}
    assert pairs.set_index("Setting").loc["Personalized + Gold Information", "Need Align."] == 80


def test_table4_of_scores_that_are_all_unscored_is_empty_not_an_error() -> None:
    """Every judgment of a run failed or unscored (values None): the analysis has no mean to show; it once
    stopped the quickstart with KeyError 'Judge'."""
    params = {"user_context": "none"}
    frame = pd.DataFrame(_score_rows("none", params, {"tone": None, "recall": None}))
    assert table4(frame, {"none": ResponderParams.model_validate(params)}).empty


def test_shannon_equitability_by_hand() -> None:
    assert shannon_equitability([5, 5, 5, 5]) == pytest.approx(1.0)
    p = [0.5, 0.25, 0.25]
    assert shannon_equitability([2, 1, 1, 0]) == pytest.approx(-sum(x * math.log(x) for x in p) / math.log(3))
    assert shannon_equitability([3, 0]) is None


def test_judges_score_through_the_runner(data) -> None:
    inst = data.instances[0]
    out = AgentOutput(inst.instance_id, "a", 0, "The battery is the main cost.")
    judges = [RecallJudge(), CriteriaJudge()]
    js = asyncio.run(judge_shard(judges, [JudgeBinding("j", ScriptedChat(answer))], {inst.instance_id: inst}, [out]))
    scores = score_outputs(judges, {inst.instance_id: inst}, [out], js)
    scores += BespokeBenchmark().combine(scores)
    by = {s.metric: s.value for s in scores}
    assert by["tone"] == 100.0 and by["need_alignment"] == 80.0  # 1..5 x 20
    assert by["avg"] == pytest.approx((80 + 60 + 100 + 40 + by["recall"]) / 5)


def test_table5_layout() -> None:
    from perseval.benchmarks.bespoke.history_retrieval import table5

    rows = [{"agent": a, "backbone": "m", "retriever": "minilm", "agent_params": json.dumps({"expansion": e}),
             "instance_id": f"i{k}", "metric": m, "value": v}
            for a, e, vals in (("q", "none", (10.0, None)), ("c", "cot", (40.0, 60.0)))
            for k, v in enumerate(vals) for m in ("ndcg@10", "ndcg@20")]
    insts = [Instance(f"i{k}", "bespoke-history", "u", "u", "q", {}, {"need": "n", "oracle": ["a"] * k})
             for k in range(2)]
    from perseval.benchmarks.bespoke.agents.history_retriever import HistoryRetrieverParams

    typed = {"q": HistoryRetrieverParams(expansion="none"), "c": HistoryRetrieverParams(expansion="cot")}
    t = table5(pd.DataFrame(rows), insts, typed).set_index("Query Type")
    assert t.loc["Original Query", "nDCG@10"] == pytest.approx(0.10) and t.loc["+CoT", "nDCG@20"] == pytest.approx(0.5)
    assert t.loc["Original Query", "Queries without oracle sessions"] == 1 and t.loc["+CoT", "Queries scored"] == 2
    assert t.loc["+CoT", "Oracle sessions per query"] == 0.5


def test_table4_intervals_resample_users() -> None:
    from perseval.benchmarks.bespoke.analysis import table4_ci
    from perseval.metrics.uncertainty import cluster_mean

    tones = [80.0, 60.0, 100.0, 40.0, 60.0, 20.0, 100.0, 80.0, 60.0, 40.0, 80.0, 100.0]
    users = [f"u{k // 2}" for k in range(len(tones))]  # two queries per user
    frame = pd.DataFrame([{"backbone": "m", "agent": "sel", "retriever": "minilm", "judge": "j", "agent_params": "{}",
                           "instance_id": f"i{k}", "metric": "tone", "value": v, "n_unscored": 0, "user_id": users[k]}
                          for k, v in enumerate(tones)])
    row = table4_ci(frame, []).set_index(["Agent", "Column"]).loc[("sel", "Tone")]
    est = cluster_mean(tones, users)
    assert row["mean"] == pytest.approx(table4(frame, {"sel": ResponderParams()}).loc[0, "Tone"])
    assert (row["ci_low"], row["ci_high"], row["n_users"], row["n"]) == (est.ci_low, est.ci_high, 6, 12)
