"""Your own data through IBA (issue 14): a hand-written release outside perseval's taxonomy
(tests/data/iba_outside_release: six users, each with explicit preference evidence among 20 noise
turns, scenarios perseval does not know) through the loader, `sample:`, the oracle and IBA-Agent."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.iba.agents.iba_agent import prompts
from perseval.benchmarks.iba.agents.iba_agent.agent import IbaAgent
from perseval.benchmarks.iba.agents.iba_agent.salience import TASK_RELEVANCE, parse_rating, score
from perseval.benchmarks.iba.agents.oracle import IbaOracleAgent, slot_dimension
from perseval.benchmarks.actions import ActionFormat
from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.evidence_kinds import TABLE12
from perseval.benchmarks.iba.evidence import RETENTION_THRESHOLD
from perseval.benchmarks.iba.judges.slots import IbaSlotJudge
from perseval.benchmarks.iba.qa import dimension_name, known_scenario
from perseval.benchmarks.iba.release import IBA_LAYOUT
from perseval.core.errors import InputError
from perseval.judges.base import JudgeBinding
from perseval.core.instances import Document
from tests.scripted import ScriptedChat
from tests.conftest import by_owner as owners

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "tests" / "data" / "iba_outside_release"


def evidence_docs(docs: list[Document]) -> list[Document]:
    return [d for d in docs if d.meta.get("supports")]


# --- the release itself -------------------------------------------------------------------------------------


def test_the_release_is_outside_the_taxonomy_with_evidence_among_noise():
    data = IBA_LAYOUT.load(RELEASE)
    assert len(data.instances) == 6 and all(known_scenario(i.payload["scenario"]) is None for i in data.instances)
    for user, docs in owners(data.documents).items():
        ev = evidence_docs(docs)
        assert 1 <= len(ev) <= 2 and len(docs) - len(ev) == 20, user
    kinds = {s["kind"] for d in data.documents for s in d.meta.get("supports", [])}
    assert "statement" in kinds


def test_an_evidence_kind_outside_the_five_names_file_row_and_field(tmp_path):
    shutil.copytree(RELEASE, tmp_path / "r")
    hist = tmp_path / "r" / "histories.jsonl"
    lines = hist.read_text().splitlines()
    row = next(n for n, line in enumerate(lines) if '"evidence"' in line)
    lines[row] = lines[row].replace('"kind": "statement"', '"kind": "preference"')
    hist.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"histories.jsonl, row {row + 1}, field 'evidence\[0\].kind': unknown value "
                                         r"'preference'; expected one of \['correction', 'rejection', 'complaint', "
                                         r"'statement', 'behaviour'\]"):
        IBA_LAYOUT.load(tmp_path / "r")
    lines[row] = lines[row].replace(', "kind": "preference"', "")  # no kind at all is allowed: unspecified
    hist.write_text("\n".join(lines) + "\n")
    doc = IBA_LAYOUT.load(tmp_path / "r").documents[row]
    assert doc.meta["supports"][0]["kind"] == "unspecified" and doc.meta["salience"] == 0


# --- sample: --------------------------------------------------------------------------------------------------


def ids(data) -> list[str]:
    return [i.instance_id for i in data.instances]


def test_sample_picks_that_many_instances_seeded_and_in_file_order():
    every = ids(IBA_LAYOUT.load(RELEASE))
    two = IbaBenchmark().build(sample=2, seed=1, source=RELEASE)
    assert len(two.instances) == 2 and ids(two) == sorted(ids(two), key=every.index)
    assert ids(IbaBenchmark().build(sample=2, seed=1, source=RELEASE)) == ids(two)  # deterministic
    three = IbaBenchmark().build(sample=3, seed=1, source=RELEASE)
    assert set(ids(two)) < set(ids(three))  # a larger sample extends a smaller one
    assert len({tuple(ids(IbaBenchmark().build(sample=2, seed=s, source=RELEASE))) for s in range(8)}) > 1
    assert ids(IbaBenchmark().build(sample=50, seed=1, source=RELEASE)) == every
    # only the chosen users' histories travel with them, and the info counts the sample
    assert {d.owner for d in two.documents} == {i.user_id for i in two.instances}
    assert two.info["n_instances"] == 2 and two.info["n_instances_in_release"] == 6 and two.info["sample"] == 2
    probes = IbaBenchmark({"qa_probes": True}).build(sample=2, seed=1, source=RELEASE)
    assert len(probes.instances) == 4 and probes.info["qa_probes"] == 2


# --- the oracle -----------------------------------------------------------------------------------------------


def run_oracle(data, inst):
    by_owner = owners(data.documents)
    ctx = AgentContext(documents=lambda u: by_owner.get(u, []))
    return asyncio.run(IbaOracleAgent().act(inst.public(), ctx, 0, "iba-oracle"))


def test_the_oracle_works_from_the_releases_own_evidence():
    data = IBA_LAYOUT.load(RELEASE)
    for inst in data.instances:
        out = run_oracle(data, inst)
        assert out.status == "ok", inst.instance_id
        want = {p["dimension"]: p["value"] for p in inst.gold["preferences"]}
        if inst.payload["action_type"] == "call_api":
            judgments = asyncio.run(IbaSlotJudge().judge(inst, out, JudgeBinding("iba.slots")))
            assert IbaSlotJudge().score(inst, out, judgments)[0].value == 100.0, inst.instance_id
            assert out.parsed.items() >= inst.payload["api"]["task_fixed"].items()
        else:  # text: one line per dimension, the latest value of a changed preference
            lines = [f"- {dimension_name(None, dim)}: {value}" for dim, value in want.items()]
            assert out.text.splitlines()[1:] == lines
    hotel = next(i for i in data.instances if i.instance_id == "own-hotel-1")
    slots = next(t for t in run_oracle(data, hotel).trace if t["step"] == "oracle_slots")["slots"]
    assert slots == [{"slot": "floor_preference", "dimension": "floor", "matched_by": "value"}]
    running = next(i for i in data.instances if i.instance_id == "own-running-1")
    assert "morning" not in run_oracle(data, running).text


def test_a_slot_is_matched_by_name_else_by_one_fitting_value_never_by_a_guess():
    slot = {"name": "Milk", "values": ["oat", "whole"]}
    assert slot_dimension(slot, {"milk": "whole", "size": "oat"}) == ("milk", "name")
    assert slot_dimension({"name": "dairy", "values": ["oat", "whole"]}, {"milk": "oat", "size": "large"}) == \
        ("milk", "value")
    assert slot_dimension({"name": "dairy", "values": ["oat", "whole"]}, {"milk": "oat", "topping": "whole"}) == \
        (None, "none")
    assert slot_dimension({"name": "dairy"}, {"milk": "oat"}) == (None, "none")


# --- the salience rubric ----------------------------------------------------------------------------------------


def test_the_rubric_keeps_explicit_evidence_and_not_a_lone_implicit_cue():
    assert score(True, ["statement"]) >= RETENTION_THRESHOLD  # issue 14: a direct statement was scored 2 of 5
    for kind in ("correction", "rejection", "complaint"):
        assert score(True, [kind]) > score(True, ["statement"])
    assert score(True, ["behaviour"]) < RETENTION_THRESHOLD <= score(True, ["behaviour", "statement"])
    assert score(False, ["correction", "complaint"]) == 0  # about something else: no evidence for this task
    assert score(True, []) == TASK_RELEVANCE
    assert score(True, ["correction", "rejection"]) == score(True, ["correction"])  # one Table 12 category
    assert score(True, list(TABLE12)) == 10
    assert set(prompts.SIGNAL_HINTS) == set(TABLE12)  # the labels the model may give are the five kinds
    assert prompts.SALIENCE_SCHEMA["properties"]["signals"]["items"]["enum"] == list(prompts.SIGNAL_HINTS)


def test_rating_answers_are_read_from_json_a_cut_reply_or_a_bare_number():
    r = parse_rating('{"relevant": true, "signals": ["statement", "Behavior", "dance"]}')
    assert (r.score, r.relevant, r.signals) == (6, True, ("statement", "behaviour"))
    assert parse_rating('{"relevant": "no", "signals": ["statement"]}').score == 0
    cut = parse_rating('{"relevant": true, "signals": ["complaint", "state')
    assert (cut.score, cut.signals) == (6, ("complaint",))
    assert parse_rating('{"score": 7}').score == 7 and parse_rating('{"score": 7}').trace() == {"bare_score": True}
    assert parse_rating('{"relevant": "maybe"}') is None and parse_rating("no idea") is None


# --- IBA-Agent on the release: real MiniLM retrieval, scripted raters ---------------------------------------------


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """The release and a real MiniLM + FAISS index of its histories."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from perseval.experiment.components import make_retriever
    from perseval.retrieval.settings import RetrieverConfig
    from perseval.experiment.config import load_config

    data = IBA_LAYOUT.load(RELEASE)
    retriever = make_retriever(load_config(RetrieverConfig, ROOT / "configs" / "retrievers" / "minilm.yaml"))
    folder = tmp_path_factory.mktemp("index")
    retriever.build(data.documents, folder)
    return data, retriever.open(folder)


def rater(data, labels_of, user: str) -> ScriptedChat:
    """A scripted backbone: the salience prompt is answered by `labels_of(doc)` for the doc of `user` it
    shows (users share noise texts); other stages get fixed text."""
    by_text = {d.text[:300]: d for d in data.documents if d.owner == user}

    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if "past messages as evidence" not in messages[0]["content"]:
            return '{"preferences": []}' if "infer" in messages[0]["content"] else "nothing usable"
        passage = re.search(r"Past message:\n(.*)\Z", prompt, re.S).group(1)  # the passage comes last
        return json.dumps(labels_of(by_text[passage]))

    return ScriptedChat(answer)


def perfect(doc: Document) -> dict[str, Any]:
    """What a rater that follows the rubric says: evidence turns carry their kinds, noise nothing."""
    kinds = [s["kind"] for s in doc.meta.get("supports", [])]
    return {"relevant": bool(kinds), "signals": kinds}


def run_agent(indexed, inst, llm, **params):
    data, index = indexed
    by_owner = owners(data.documents)

    async def retrieve(owner, query, k):
        return index.search(owner, query, k)

    ctx = AgentContext(llm=llm, retrieve=retrieve, documents=lambda u: by_owner.get(u, []),
                       request_format=ActionFormat())
    return asyncio.run(IbaAgent(params).act(inst.public(), ctx, 0, "iba-agent"))


def kept(out) -> list[dict[str, Any]]:
    return next(t for t in out.trace if t["step"] == "kept_passages")


def test_an_explicit_statement_among_noise_reaches_the_agents_final_context(indexed):
    data, _ = indexed
    for inst in data.instances:
        gold = {d.doc_id for d in evidence_docs(owners(data.documents)[inst.user_id])}
        llm = rater(data, perfect, inst.user_id)
        out = run_agent(indexed, inst, llm)
        k = kept(out)
        # robust selection: the task text's top-3 noise is dropped too, since this rater is sure it is unrelated
        assert k["selection"] == "robust" and k["task_top_k_below_threshold"] == [], inst.instance_id
        got = {p["doc_id"] for p in k["passages"]}
        assert got == gold, inst.instance_id  # every evidence turn kept, no noise turn
        assert all(p["salience"] >= RETENTION_THRESHOLD for p in k["passages"])
        # the preference extraction reads the statement itself
        evidence = next(t for t in out.trace if t["step"] == "compact_evidence")["evidence"]
        statement = next(d for d in data.documents if d.doc_id in gold).text.split("\n")[0][len("User: "):]
        assert statement[:60] in evidence, inst.instance_id
        extraction = [c["messages"][-1]["content"] for c in llm.calls if "infer" in c["messages"][0]["content"]]
        assert statement[:60] in extraction[0]


def test_when_no_passage_passes_the_best_are_kept_and_the_trace_says_so(indexed):
    data, _ = indexed
    inst = next(i for i in data.instances if i.instance_id == "own-coffee-1")
    statement = evidence_docs(owners(data.documents)[inst.user_id])[0].doc_id
    unrelated = lambda d: {"relevant": False, "signals": []}  # noqa: E731 - every passage scores 0
    out = run_agent(indexed, inst, rater(data, unrelated, inst.user_id))
    k = kept(out)
    assert k["selection"] == "below_threshold" and k["note"].startswith("0 passage(s) reached salience 5")
    assert len(k["passages"]) == 3 and all(p["salience"] == 0 for p in k["passages"])
    # a rater that cannot tell passages apart leaves exactly the RAG baseline's top-3: the task text's retrieval
    task_top3 = [p["doc_id"] for p in next(t for t in out.trace if t["step"] == "retrieve")["passages"]]
    assert k["below_threshold"] == [p["doc_id"] for p in k["passages"]] == task_top3
    assert statement in task_top3
    literal = kept(run_agent(indexed, inst, rater(data, unrelated, inst.user_id), min_passages=0,
                             selection="threshold"))
    assert literal["selection"] == "reranked" and literal["passages"] == []
    # robust selection: a rater sure that the task text's top-3 is unrelated may drop it too
    robust = kept(run_agent(indexed, inst, rater(data, unrelated, inst.user_id), min_passages=0))
    assert robust["selection"] == "robust" and robust["passages"] == []


def test_a_weak_rater_cannot_crowd_the_statement_out(indexed):
    """What the embedded SmolLM2 did when measured: every passage 'relevant', a couple of noise turns
    tagged with every signal (10), the statement with none (3). Two noise turns pass; the best of the
    relevant rest tops the context up to three, and the statement, the task text's best hit, wins the tie."""
    data, _ = indexed
    inst = next(i for i in data.instances if i.instance_id == "own-coffee-1")
    statement = evidence_docs(owners(data.documents)[inst.user_id])[0].doc_id
    loud: list[str] = []  # the first two noise turns it is asked about

    def weak(doc: Document) -> dict[str, Any]:
        if doc.doc_id != statement and len(loud) < 2:
            loud.append(doc.doc_id)
        return {"relevant": True, "signals": list(TABLE12) if doc.doc_id in loud else []}

    k = kept(run_agent(indexed, inst, rater(data, weak, inst.user_id), selection="threshold"))
    assert k["selection"] == "topped_up" and k["note"].startswith("2 passage(s) reached salience 5; added the 1")
    assert [p["doc_id"] for p in k["passages"]] == loud + [statement]
    assert [p["salience"] for p in k["passages"]] == [10, 10, TASK_RELEVANCE] and k["below_threshold"] == [statement]


def test_a_weak_rater_keeps_at_least_the_retrieval_it_re_ranks(indexed):
    """The robust selection (the default): the same weak rater, and the task text's whole top-3 stays beside the
    two loud noise turns, ranked after them (by the rater's score, ties by retrieval score)."""
    data, _ = indexed
    inst = next(i for i in data.instances if i.instance_id == "own-coffee-1")
    statement = evidence_docs(owners(data.documents)[inst.user_id])[0].doc_id
    loud: list[str] = []

    def weak(doc: Document) -> dict[str, Any]:
        if doc.doc_id != statement and len(loud) < 2:
            loud.append(doc.doc_id)
        return {"relevant": True, "signals": list(TABLE12) if doc.doc_id in loud else []}

    out = run_agent(indexed, inst, rater(data, weak, inst.user_id))
    k = kept(out)
    top3 = next(t for t in out.trace if t["step"] == "retrieve")["passages"]
    ids = [p["doc_id"] for p in k["passages"]]
    assert k["selection"] == "robust" and set(ids[:2]) == set(loud) and set(ids[2:]) == {p["doc_id"] for p in top3} - set(loud)
    scores = [p["score"] for p in k["passages"][2:]]
    assert scores == sorted(scores, reverse=True) and statement in ids
    assert set(k["task_top_k_below_threshold"]) == set(ids[2:])


# --- the oracle at scale, on a release whose scenarios no taxonomy knows ---------------------------------------


def test_the_oracle_is_the_upper_reference_on_every_instance_of_a_renamed_release(tmp_path):
    """30 constructed instances (Table 2 mix, dynamic preferences) written as a release with every scenario
    renamed: before issue 14 each one failed with 'unknown IBA scenario' and was scored 0."""
    from perseval.benchmarks.iba.release import write_release

    built = IbaBenchmark({"noise_per_evidence": 3, "distribution": "table2", "dynamic_rate": 0.6}).build(
        sample=30, seed=5, source=None)
    folder = write_release(built, tmp_path / "release")
    for name in ("instances.jsonl", "histories.jsonl"):
        rows = [json.loads(line) for line in (folder / name).read_text().splitlines()]
        for row in rows:
            if row.get("scenario"):
                row["scenario"] = f"{row['scenario']} (our own)"
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = IBA_LAYOUT.load(folder)
    assert len(data.instances) == 30 and all(known_scenario(i.payload["scenario"]) is None for i in data.instances)
    kinds = {i.payload["action_type"] for i in data.instances}
    assert kinds == {"call_api", "generate"} and any(i.gold["n_dynamic"] for i in data.instances)
    for inst in data.instances:
        out = run_oracle(data, inst)
        assert out.status == "ok", inst.instance_id
        if inst.payload["action_type"] == "call_api":
            judgments = asyncio.run(IbaSlotJudge().judge(inst, out, JudgeBinding("iba.slots")))
            assert IbaSlotJudge().score(inst, out, judgments)[0].value == 100.0, inst.instance_id
        else:  # every hidden preference, at its latest value, named in the answer
            for p in inst.gold["preferences"]:
                assert f"- {dimension_name(None, p['dimension'])}: {p['value']}" in out.text, inst.instance_id


# --- a preference stated late in a long turn (third-party logs have long messages) ------------------------------

CHATTER = ("Thanks for the help with the trip last week, the museum list was great and we went to four of them, "
           "though the queue at the second one took forever and the kids got bored, so next time I'd plan "
           "fewer stops per day. Anyway the train back was late again and I ended up answering emails on the "
           "platform for an hour, which was not how I wanted to spend a Sunday evening, but the view from "
           "the bridge made up for it and we had a lovely dinner at the small place near the station. ")
LATE = "Oh, and for coffee orders: I only ever drink oat milk, never dairy."


def long_turn_release(folder: Path) -> Path:
    folder.mkdir()
    noise = [json.loads(line) for line in (RELEASE / "histories.jsonl").read_text().splitlines()
             if json.loads(line)["user_id"] == "u-ana" and not json.loads(line).get("evidence")]
    long = {"user_id": "u-ana", "timestamp": "2025-03-25T09:00:00", "user": CHATTER + LATE,
            "assistant": "Noted, oat milk it is.", "evidence": [{"dimension": "milk", "value": "oat",
                                                                     "kind": "statement"}]}
    (folder / "histories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in noise + [long]))
    (folder / "instances.jsonl").write_text((RELEASE / "instances.jsonl").read_text().splitlines()[0] + "\n")
    return folder


def test_a_preference_stated_late_in_a_long_turn_is_seen_by_the_rater_and_the_extraction(tmp_path):
    """The rater saw the first 300 characters of a passage, and the extraction 300 of the user's side:
    a statement after a paragraph of chatter reached neither. Now the rater sees the whole chunk and
    the extraction shares 3000 characters among the kept passages."""
    from perseval.experiment.components import make_retriever
    from perseval.retrieval.settings import RetrieverConfig
    from perseval.experiment.config import load_config

    data = IBA_LAYOUT.load(long_turn_release(tmp_path / "release"))
    long_id = next(d.doc_id for d in data.documents if d.meta.get("supports"))
    assert len(CHATTER) > 400 and len(next(d.text for d in data.documents if d.doc_id == long_id)) < 1200
    retriever = make_retriever(load_config(RetrieverConfig, ROOT / "configs" / "retrievers" / "minilm.yaml"))
    retriever.build(data.documents, tmp_path / "index")
    index = (data, retriever.open(tmp_path / "index"))

    def by_content(messages: list[dict[str, Any]]) -> str:  # a rater that labels what it is shown
        if "past messages as evidence" in messages[0]["content"]:
            seen = "oat milk" in messages[-1]["content"]
            return json.dumps({"relevant": seen, "signals": ["statement"] if seen else []})
        return '{"preferences": []}' if "infer" in messages[0]["content"] else "nothing usable"

    def extraction_prompt(llm: ScriptedChat) -> str:
        return next(c["messages"][-1]["content"] for c in llm.calls if "infer" in c["messages"][0]["content"])

    llm = ScriptedChat(by_content)
    k = kept(run_agent(index, data.instances[0], llm))
    assert [p["doc_id"] for p in k["passages"]] == [long_id]  # the noise is unrelated: nothing tops up
    assert k["passages"][0]["salience"] >= RETENTION_THRESHOLD and LATE in extraction_prompt(llm)
    # the old sizes: the rater cannot see it (only the top-up keeps it) and the extraction reads it cut off
    old = ScriptedChat(by_content)
    k = kept(run_agent(index, data.instances[0], old, salience_chars=300, evidence_total_chars=0))
    assert all(p["salience"] < RETENTION_THRESHOLD for p in k["passages"]) and LATE not in extraction_prompt(old)
