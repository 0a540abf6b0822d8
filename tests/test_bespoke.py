"""Bespoke thin slice: release layout, loader validation, judge parsing, scoring, responder agent."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.bespoke import layout as L
from perseval.benchmarks.bespoke.agents.responder import BespokeResponder
from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark
from perseval.benchmarks.bespoke.judges.criteria import CriteriaJudge
from perseval.benchmarks.bespoke.judges.recall import NO_RESPONSE, RecallJudge
from perseval.judges.base import JudgeBinding
from perseval.pipeline.runner import judge_shard, score_outputs
from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.sample import write_sample
from perseval.experiment.config import AgentConfig, load_config
from perseval.core.errors import ConfigError, InputError
from perseval.core.instances import CORPUS_OWNER, AgentOutput, Document, Instance, Judgment, Passage
from tests.scripted import ScriptedChat

from .conftest import shipped_config

ROOT = Path(__file__).resolve().parents[1]


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture()
def release(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "release", users=2, seed=7)


def rows(root: Path, spec: L.TableSpec) -> list[dict]:
    return pq.read_table(spec.path(root)).to_pylist()


def rewrite(root: Path, spec: L.TableSpec, new_rows: list[dict], columns: list[str] | None = None) -> None:
    cols = columns if columns is not None else list(spec.columns)
    pq.write_table(pa.table({c: pa.array([r[c] for r in new_rows], type=pa.string()) for c in cols}),
                   spec.path(root))


def instance(claims: list[str]) -> Instance:
    shot = {"contents": "An earlier answer.",
            **{c: {"score": 3, "feedback": f"{c} was fine"} for c in L.CRITERIA}}
    gold = {"need": "Wants a short, casual answer with examples.", "claims": claims,
            "rubric": "Tone\n- 5: casual", "shots": [shot], "meta_test": []}
    return Instance("bespoke-u1-1", "bespoke", "u1", "u1", "What is inflation?", {}, gold)


def output(text: str = "Prices rise over time.", status: str = "ok") -> AgentOutput:
    return AgentOutput("bespoke-u1-1", "agent-a", 0, text, status=status)  # type: ignore[arg-type]


def scripted_judge(criteria_answer: str, present: set[str] = frozenset()) -> ScriptedChat:
    """Claim prompts (they start with 'Fact:') get a verdict; the E_p prompt gets `criteria_answer`."""
    def answer(messages: list[dict]) -> str:
        user = messages[-1]["content"]
        if user.startswith("Fact:"):
            fact = user.splitlines()[0][len("Fact: "):]
            return json.dumps({"verdict": fact in present, "reason": "checked"})
        return criteria_answer
    return ScriptedChat(answer)


JUDGES = (RecallJudge(), CriteriaJudge())  # what a judge YAML without `kind` binds a model to on Bespoke


def judge_all(inst: Instance, out: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
    return asyncio.run(judge_shard(JUDGES, [binding], {inst.instance_id: inst}, [out]))


def score_all(inst: Instance, out: AgentOutput, judgments: list[Judgment]) -> list:
    return score_outputs(JUDGES, {inst.instance_id: inst}, [out], judgments)


def judge(model: ScriptedChat, repeat: int = 0) -> list[Judgment]:
    return judge_all(instance(["c0", "c1", "c2", "c3"]), output(), JudgeBinding("j", model, repeat))


def by_item(judgments: list[Judgment]) -> dict[str, Judgment]:
    return {j.item_id: j for j in judgments}


VALID = json.dumps({"need_alignment": {"score": 4, "feedback": "covers it"},
                    "content_depth": {"score": 3, "feedback": "a bit thin"},
                    "tone": {"score": 5, "feedback": "friendly"},
                    "explanation_style": {"score": 2, "feedback": "no examples"}})


# --- layout, sample, loader ----------------------------------------------------------------


def test_sample_round_trip_counts(release: Path) -> None:
    # the layout itself is checked against a hand-written fixture in test_bespoke_layout.py
    data = load_release(release)
    assert len(data.queries) == 10  # 2 users x 5 queries
    assert {q.user for q in data.queries} == {"user1", "user2"}
    for q in data.queries:
        assert 3 <= len(q.claims) <= 6
        assert 5 <= len(q.shots) <= 6 and len(q.meta_test) == 2  # 5 shots by default; 2 meta pairs per query
        assert all(set(s.ratings) == set(L.CRITERIA) for s in q.shots)
        assert all(1 <= r.score <= 5 for s in q.shots for r in s.ratings.values())
        assert all(title in q.rubric for title in L.CRITERION_TITLES.values())
    for user in ("user1", "user2"):
        sources = [s.source for s in data.sessions if s.user == user]
        assert sources.count("chat") >= 5 and sources.count("search") >= 10
    corpus = {p.text for p in data.corpus}
    assert all(c in corpus for q in data.queries for c in q.claims)  # gold claims are searchable
    assert len(corpus) > sum(len(q.claims) for q in data.queries) // 2  # and there are distractors


def test_sample_is_seeded(tmp_path: Path) -> None:
    a, b, c = (write_sample(tmp_path / n, users=1, seed=s) for n, s in (("a", 3), ("b", 3), ("c", 4)))
    assert rows(a, L.GOLD) == rows(b, L.GOLD) and rows(a, L.CHAT) == rows(b, L.CHAT)
    assert rows(a, L.CHAT) != rows(c, L.CHAT)


def test_sample_json_values_have_release_shapes(release: Path) -> None:
    gold = json.loads(rows(release, L.GOLD)[0]["gold_information_value"])
    assert list(gold) == ["gold_information"] and isinstance(gold["gold_information"], list)
    shot = json.loads(rows(release, L.SHOTS)[0]["evaluation_shot_value"])
    assert set(shot) == {"query", "gold_information_need", "response_list"}
    assert set(shot["response_list"][0]) == {"contents", *L.CRITERIA}
    assert set(shot["response_list"][0]["tone"]) == {"score", "feedback"}


def test_loader_missing_column(release: Path) -> None:
    rewrite(release, L.QUERIES, rows(release, L.QUERIES), ["user", "query-id", "query"])
    with pytest.raises(InputError) as err:
        load_release(release)
    assert "query_table.parquet" in str(err.value) and "field 'gold_information_need'" in str(err.value)
    assert "missing column" in str(err.value)


def test_loader_bad_json_names_file_row_and_field(release: Path) -> None:
    table = rows(release, L.GOLD)
    table[2]["gold_information_value"] = '{"gold_information": ["a", '
    rewrite(release, L.GOLD, table)
    with pytest.raises(InputError) as err:
        load_release(release)
    msg = str(err.value)
    assert "gold_information.parquet" in msg and "row 2" in msg and "field 'gold_information_value'" in msg
    assert (err.value.row, err.value.field) == (2, "gold_information_value")


def test_loader_wrong_json_shape_names_nested_field(release: Path) -> None:
    table = rows(release, L.SHOTS)
    value = json.loads(table[1]["evaluation_shot_value"])
    value["response_list"][0]["tone"]["score"] = 7
    table[1]["evaluation_shot_value"] = json.dumps(value)
    rewrite(release, L.SHOTS, table)
    with pytest.raises(InputError) as err:
        load_release(release)
    msg = str(err.value)
    assert "evaluation_shot.parquet" in msg and "row 1" in msg
    assert "field 'evaluation_shot_value.response_list[0].tone.score'" in msg


def test_loader_missing_file_and_folder(release: Path) -> None:
    L.SEARCH.path(release).unlink()
    with pytest.raises(InputError) as err:
        load_release(release)
    assert "search_history.parquet" in str(err.value) and "file missing" in str(err.value)
    shutil.rmtree(release / "chat_history")
    with pytest.raises(InputError) as err:
        load_release(release)
    assert "chat_history" in str(err.value) and "folder missing" in str(err.value)


def test_loader_query_without_gold_claims(release: Path) -> None:
    gold = rows(release, L.GOLD)
    dropped = gold.pop(3)
    rewrite(release, L.GOLD, gold)
    queries = rows(release, L.QUERIES)
    row = next(i for i, q in enumerate(queries)
               if (q["user"], q["query-id"]) == (dropped["user"], dropped["query-id"]))
    with pytest.raises(InputError) as err:
        load_release(release)
    msg = str(err.value)
    assert "query_table.parquet" in msg and f"row {row}" in msg and "field 'query-id'" in msg
    assert "no gold claims" in msg


def test_loader_empty_claim_list(release: Path) -> None:
    gold = rows(release, L.GOLD)
    gold[0]["gold_information_value"] = json.dumps({"gold_information": []})
    rewrite(release, L.GOLD, gold)
    with pytest.raises(InputError, match=r"row 0, field 'gold_information_value.gold_information'"):
        load_release(release)


def test_corpus_is_optional(release: Path) -> None:
    shutil.rmtree(release / "corpus")
    data = BespokeBenchmark().build(sample=3, seed=0, source=release)
    assert len(data.instances) == 3
    corpus = [d for d in data.documents if d.owner == CORPUS_OWNER]
    assert corpus and {d.meta["source"] for d in corpus} == {"page_summary"}  # the official release's default
    data = BespokeBenchmark({"corpus_page_summaries": False}).build(sample=3, seed=0, source=release)
    assert not any(d.owner == CORPUS_OWNER for d in data.documents)
    assert data.info["corpus_passages"] == 0


# --- build -------------------------------------------------------------------------------------


def test_build_from_generated_sample() -> None:
    data = BespokeBenchmark().build(sample=7, seed=1, source=None)
    assert len(data.instances) == 7
    for inst in data.instances:
        assert re.fullmatch(rf"bespoke-{inst.user_id}-[1-5]", inst.instance_id)
        assert inst.group == inst.user_id and inst.payload == {} and inst.benchmark == "bespoke"
        assert set(inst.gold) >= {"need", "claims", "rubric", "shots"}
        assert 3 <= len(inst.gold["claims"]) <= 6 and inst.public().gold == {}
    users = {i.user_id for i in data.instances}
    history = [d for d in data.documents if d.owner != CORPUS_OWNER]
    assert {d.owner for d in history} == users
    assert {d.meta["source"] for d in history} == {"chat", "search"}
    assert any(d.owner == CORPUS_OWNER for d in data.documents)
    assert data.info["queries"] == 7 and data.info["users"] == len(users)
    again = BespokeBenchmark().build(sample=7, seed=1, source=None)
    assert [i.gold for i in again.instances] == [i.gold for i in data.instances]


def test_unknown_benchmark_and_judge_params_are_rejected() -> None:
    with pytest.raises(ConfigError, match="response_chars"):
        BespokeBenchmark({"response_chars": 10})  # a judge's param, not the benchmark's
    with pytest.raises(ConfigError, match="max_shot"):
        CriteriaJudge({"max_shot": 10})
    assert CriteriaJudge({"max_shots": 10}).params.max_shots == 10
    assert CriteriaJudge().params.max_shots == 5 and CriteriaJudge().params.prompt_budget_tokens is None


# --- judge --------------------------------------------------------------------------------------


def test_judge_valid_answer_gives_four_criteria() -> None:
    model = scripted_judge(VALID)
    got = by_item(judge(model, repeat=2))
    assert {c: got[c].score for c in L.CRITERIA} == {
        "need_alignment": 4.0, "content_depth": 3.0, "tone": 5.0, "explanation_style": 2.0}
    assert all(got[c].status == "scored" and got[c].kind == "criterion" for c in L.CRITERIA)
    assert got["tone"].feedback == "friendly" and got["tone"].raw == VALID
    assert all(call["repeat"] == 2 for call in model.calls) and len(model.calls) == 5  # 4 claims + E_p
    assert all(call["json_schema"] is not None for call in model.calls)


def test_judge_out_of_range_criterion_is_unscored_alone() -> None:
    answer = json.loads(VALID)
    answer["tone"]["score"] = 7
    got = by_item(judge(scripted_judge(json.dumps(answer))))
    assert got["tone"].status == "unscored" and got["tone"].score is None
    assert '"score": 7' in got["tone"].raw
    assert [got[c].score for c in ("need_alignment", "content_depth", "explanation_style")] == [4.0, 3.0, 2.0]


def test_judge_garbage_is_unscored_not_zero() -> None:
    garbage = "I think this answer is pretty good overall!!"
    judgments = judge(scripted_judge(garbage))
    crit = [j for j in judgments if j.kind == "criterion"]
    assert len(crit) == 4 and all(j.status == "unscored" and j.score is None and j.raw == garbage for j in crit)
    scores = {s.metric: s for s in score_all(instance(["c0", "c1", "c2", "c3"]), output(), judgments)}
    assert scores["personalization"].value is None and scores["personalization"].n_unscored == 4
    assert scores["tone"].value is None and scores["tone"].n_items == 1


def test_judge_recall_mixture() -> None:
    judgments = judge(scripted_judge(VALID, present={"c0", "c2", "c3"}))
    claims = sorted((j for j in judgments if j.kind == "claim"), key=lambda j: j.item_id)
    assert [j.score for j in claims] == [1.0, 0.0, 1.0, 1.0]
    scores = {s.metric: s.value for s in score_all(instance(["c0", "c1", "c2", "c3"]), output(), judgments)}
    assert scores["recall"] == pytest.approx(75.0)
    assert scores["personalization"] == pytest.approx((80 + 60 + 100 + 40) / 4)
    combined = {s.metric: s.value for s in BespokeBenchmark().combine(
        score_all(instance(["c0", "c1", "c2", "c3"]), output(), judgments))}
    assert combined == {"avg": pytest.approx((80 + 60 + 100 + 40 + 75) / 5)}  # Table 4's Avg.: criteria AND recall


def test_judge_failed_request_is_failed() -> None:
    got = judge(ScriptedChat(lambda messages: None))
    assert len(got) == 8 and all(j.status == "failed" and j.score is None for j in got)


def test_an_invalid_response_scores_floor_without_calling_judge() -> None:
    model = scripted_judge(VALID)
    inst = instance(["c0", "c1"])
    got = judge_all(inst, output("", status="invalid"), JudgeBinding("j", model))
    assert model.calls == []
    assert [j.score for j in got if j.kind == "claim"] == [0.0, 0.0]
    assert [j.score for j in got if j.kind == "criterion"] == [1.0] * 4
    assert all(j.status == "scored" and j.feedback == NO_RESPONSE for j in got)
    scores = {s.metric: s.value for s in score_all(inst, output("", "invalid"), got)}
    assert scores == {"need_alignment": 20.0, "content_depth": 20.0, "tone": 20.0,
                      "explanation_style": 20.0, "personalization": 20.0, "recall": 0.0}


def test_a_failed_output_is_neither_judged_nor_scored() -> None:
    model = scripted_judge(VALID)
    inst = instance(["c0", "c1"])
    got = judge_all(inst, output("", status="failed"), JudgeBinding("j", model))
    assert model.calls == [] and got == []
    assert score_all(inst, output("", "failed"), got) == []


# --- score --------------------------------------------------------------------------------------


def test_score_arithmetic_on_hand_fixture() -> None:
    def j(item: str, kind: str, score: float | None, status: str = "scored") -> Judgment:
        return Judgment("bespoke-u1-1", "agent-a", 0, "j", 1, item, kind, score, status)  # type: ignore[arg-type]

    judgments = [j("need_alignment", "criterion", 4), j("content_depth", "criterion", 3),
                 j("tone", "criterion", None, "unscored"), j("explanation_style", "criterion", 5),
                 j("claim-0", "claim", 1), j("claim-1", "claim", 0), j("claim-2", "claim", 1),
                 j("claim-3", "claim", None, "failed")]
    scores = {s.metric: s for s in score_all(instance(["a"] * 4), output(), judgments)}
    assert scores["need_alignment"].value == 80.0 and scores["content_depth"].value == 60.0
    assert scores["explanation_style"].value == 100.0
    assert scores["tone"].value is None and scores["tone"].n_unscored == 1
    assert scores["personalization"].value == pytest.approx(80.0)  # mean of 80, 60, 100
    assert (scores["personalization"].n_items, scores["personalization"].n_unscored) == (4, 1)
    assert scores["recall"].value == pytest.approx(200 / 3)
    # claim-3 failed: counted as a failed judgment, not also as unscored (issue 24)
    assert (scores["recall"].n_items, scores["recall"].n_unscored) == (4, 0)
    s = scores["recall"]
    assert (s.judge, s.judge_repeat, s.group, s.agent) == ("j", 1, "u1", "agent-a")


def test_score_without_judgments_is_none() -> None:
    scores = [*RecallJudge().score(instance(["a"]), output(), []), *CriteriaJudge().score(instance(["a"]), output(), [])]
    assert len(scores) == 6 and all(s.value is None for s in scores)


# --- responder agent --------------------------------------------------------------------------


class FakeContext:
    """Records what the agent asks for; two chunks of one session plus one other session."""

    def __init__(self, llm: ScriptedChat, with_search: bool = True):
        self.retrieved: list[tuple[str, str, int]] = []
        self.docs = [Document("u1", "s-chat", "User: please use bullet points\nAssistant: ok", meta={"source": "chat"}),
                     Document("u1", "s-search", "Search query: inflation basics", meta={"source": "search"}),
                     Document("u1", "s-noise", "Search query: weather", meta={"source": "search"})]

        async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
            self.retrieved.append((owner, query, k))
            return [Passage("s-search", 0, "Search query", 0.5), Passage("s-chat", 0, "User: please", 0.9),
                    Passage("s-chat", 1, "Assistant: ok", 0.7), Passage("s-noise", 0, "weather", 0.1)]

        async def search(inst: Instance, query: str, k: int) -> list[Passage]:
            return [Passage("fact-1", 0, "Inflation is a general rise in prices.", 0.8)][:k]

        self.ctx = AgentContext(llm=llm, retrieve=retrieve, documents=lambda owner: list(self.docs),
                                search=search if with_search else None)


def test_responder_raw_history_prompt_and_trace() -> None:
    llm = ScriptedChat("Inflation means prices go up.")
    fake = FakeContext(llm)
    agent = BespokeResponder({"user_context": "raw", "query_aware": True, "history_selection": "retriever",
                              "history_k": 2, "search_k": 1})
    out = asyncio.run(agent.act(instance(["a"]).public(), fake.ctx, repeat=1, name="raw"))
    assert out.status == "ok" and out.text == "Inflation means prices go up." and out.agent == "raw"
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "<query>\nWhat is inflation?\n</query>" in prompt
    assert "Inflation is a general rise in prices." in prompt  # search result
    assert "User: please use bullet points\nAssistant: ok" in prompt  # whole session, not the chunk
    assert "weather" not in prompt  # only the top history_k sessions
    assert fake.retrieved == [("u1", "What is inflation?", 8)] and llm.calls[0]["repeat"] == 1
    steps = {t["step"]: t for t in out.trace}
    assert [s["doc_id"] for s in steps["history"]["sessions"]] == ["s-chat", "s-search"]
    assert steps["history"]["sessions"][0]["score"] == 0.9
    assert steps["search"]["results"][0] == {"doc_id": "fact-1", "chunk_id": 0, "score": 0.8,
                                             "text": "Inflation is a general rise in prices."}


def test_responder_no_context_skips_history_and_budget_holds() -> None:
    llm = ScriptedChat("answer")
    fake = FakeContext(llm, with_search=False)
    out = asyncio.run(BespokeResponder({"user_context": "none"}).act(instance(["a"]), fake.ctx, 0, "none"))
    assert fake.retrieved == []
    assert "past" not in llm.calls[0]["messages"][-1]["content"]
    assert [t["step"] for t in out.trace] == ["answer", "requests"]

    llm2 = ScriptedChat("answer")
    fake2 = FakeContext(llm2)
    fake2.docs[0].text = "x" * 5000
    agent = BespokeResponder({"user_context": "raw", "query_aware": True, "history_selection": "retriever",
                              "history_k": 2, "history_chars": 400})
    asyncio.run(agent.act(instance(["a"]), fake2.ctx, 0, "raw"))
    assert len(llm2.calls[0]["messages"][-1]["content"]) < 1200


def test_responder_failed_request_is_failed() -> None:
    out = asyncio.run(BespokeResponder().act(instance(["a"]), FakeContext(ScriptedChat([None])).ctx, 0, "a"))
    assert out.status == "failed" and out.error == "scripted failure"


def test_responder_params_and_yaml_configs() -> None:
    with pytest.raises(ConfigError, match="user_context"):
        BespokeResponder({"user_context": "raw_history"})
    with pytest.raises(ConfigError, match="history.: unknown key"):
        BespokeResponder({"history": 3})
    with pytest.raises(ConfigError, match="set query_aware: true"):
        BespokeResponder({"user_context": "profile", "history_selection": "llm"})
    with pytest.raises(ConfigError, match="uses no history"):
        BespokeResponder({"user_context": "none", "query_aware": True})
    settings = {"bespoke-no-context": ("none", False, "none"), "bespoke-raw-history": ("raw", True, "retriever"),
                "bespoke-static-profile": ("profile", False, "none"), "bespoke-query-profile": ("profile", True, "none"),
                "bespoke-selected-raw": ("raw", True, "llm"), "bespoke-selected-profile": ("profile", True, "llm"),
                "bespoke-gold-information": ("profile", True, "llm")}
    for name, setting in settings.items():
        cfg = load_config(AgentConfig, shipped_config("agents", name))
        assert cfg.name == name and cfg.kind == BespokeResponder.kind
        p = BespokeResponder(cfg.params).params
        assert (p.user_context, p.query_aware, p.history_selection) == setting
    assert BespokeResponder.benchmarks == ("bespoke",)


def test_end_to_end_sample_with_scripted_models() -> None:
    """Build -> act -> judge -> score on the generated sample, with scripted models."""
    data = BespokeBenchmark().build(sample=2, seed=3, source=None)
    inst = data.instances[0]
    claim = inst.gold["claims"][0]
    llm = ScriptedChat(f"Here is what matters. {claim}")
    fake = FakeContext(llm)
    agent = BespokeResponder({"user_context": "raw", "query_aware": True, "history_selection": "retriever"})
    out = asyncio.run(agent.act(inst.public(), fake.ctx, 0, "raw"))
    model = scripted_judge(VALID, present={claim})
    judgments = judge_all(inst, out, JudgeBinding("j", model))
    scores = {s.metric: s.value for s in score_all(inst, out, judgments)}
    assert scores["recall"] == pytest.approx(100 / len(inst.gold["claims"]))
    assert scores["personalization"] == pytest.approx(70.0)
    prompt = next(c for c in model.calls if not c["messages"][-1]["content"].startswith("Fact:"))
    text = prompt["messages"][-1]["content"]
    assert inst.gold["need"] in text and "[Example 5]" in text and "[Example 6]" not in text
    assert "Need alignment feedback:" in text and inst.gold["rubric"] in text
