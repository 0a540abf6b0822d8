"""PersonaMem (`persona_mem`): the official layout's loader and its errors (file, row, field), the answer
extraction, the rule judge on crafted outputs, the agents' view of the context (end index, clipping,
swapped history), the analysis tables against a hand-computed fixture, stats, and the CPU config's plan.
The sample is tests/data/persona_mem (hand-written, in the official layout)."""
from __future__ import annotations

import asyncio
import csv
import json
import shutil
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import ANALYSIS_COLUMNS, build_all
from perseval.benchmarks.persona_mem.agents.context import before_question, clip, visible
from perseval.benchmarks.persona_mem.agents.long_context import LongContextAgent
from perseval.benchmarks.persona_mem.agents.oracle import PersonaMemOracle
from perseval.benchmarks.persona_mem.agents.rag import SessionRagAgent
from perseval.benchmarks.persona_mem.analysis import analyze, distance_bin
from perseval.benchmarks.persona_mem.answers import PersonaMemFormat, read_letter
from perseval.benchmarks.persona_mem.benchmark import PersonaMem
from perseval.benchmarks.persona_mem.judges.choice import ChoiceJudge
from perseval.benchmarks.persona_mem.loader import parse_options, read_release
from perseval.core.errors import InputError
from perseval.core.instances import AgentOutput, Document, Instance, Passage
from perseval.judges.base import JudgeBinding
from perseval.pipeline.plan import make_plan
from perseval.experiment.load import load_experiment
from tests.scripted import ScriptedChat

from .conftest import REPO
from perseval.experiment.load import experiment_file

SAMPLE = REPO / "tests" / "data" / "persona_mem"
QUESTIONS, CONTEXTS = "questions_32k.csv", "shared_contexts_32k.jsonl"


def load(source: Path = SAMPLE):
    return build_all(PersonaMem(PersonaMem.Params()), sample=100, seed=3, source=source)


def by_id(data) -> dict[str, Instance]:
    return {i.instance_id: i for i in data.instances}


# --- the layout, read ---------------------------------------------------------------------------------------

def test_the_sample_loads_as_questions_of_personas_with_their_contexts():
    data = load()
    got = by_id(data)
    assert len(got) == 10 and {i.user_id for i in data.instances} == {"fern", "omar", "lina"}
    first = got["pm-fern-1"]
    assert first.group == "recall_user_shared_facts" and first.gold == {"answer": "b"}
    assert first.payload["options"][1] == "Graphic novels about lighthouses, since you love those."  # label stripped
    assert first.payload["end_index"] == 12 and first.payload["distance_tokens"] == 180
    fern = [d for d in data.documents if d.owner == "fern"]
    assert [d.meta["index"] for d in fern] == list(range(12))
    assert fern[0].text.startswith("System: Current user persona: Fern") and fern[1].meta["role"] == "user"
    assert [d.meta["session"] for d in fern] == [0] * 7 + [1] * 5  # a later system message opens a session
    assert data.info["personas"] == 3 and data.info["shared_contexts"] == 3 and data.info["documents"] == 34


def test_a_sample_keeps_only_the_contexts_its_questions_read():
    data = build_all(PersonaMem(PersonaMem.Params()), sample=2, seed=5, source=SAMPLE)
    assert len(data.instances) == 2
    assert {d.owner for d in data.documents} == {i.user_id for i in data.instances}
    only = build_all(PersonaMem(PersonaMem.Params(question_types=["suggest_new_ideas"])), sample=9, seed=1,
                     source=SAMPLE)
    assert [i.instance_id for i in only.instances] == ["pm-omar-3"]


@pytest.mark.parametrize("text, want", [
    ("['(a) one', '(b) two', '(c) three', '(d) four']", ["one", "two", "three", "four"]),
    ('["first", "second", "third", "fourth"]', ["first", "second", "third", "fourth"]),
    ("(a) red (b) green (c) blue (d) grey", ["red", "green", "blue", "grey"]),
    ("['(a) one', '(b) two', '(c) three']", None),
    ("(a) red (c) green (b) blue (d) grey", None),
])
def test_all_options_in_each_form_the_release_uses(text, want):
    assert parse_options(text) == want


# --- broken rows: each names file, row and field -----------------------------------------------------------

def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "pm"
    shutil.copytree(SAMPLE, folder)
    return folder


def _edit_question(row: int, **fields: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / QUESTIONS
        rows = list(csv.DictReader(path.open(newline="")))
        rows[row - 1].update(fields)
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return edit


def _edit_context(line: int, change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / CONTEXTS
        lines = path.read_text().splitlines()
        lines[line - 1] = json.dumps(change(json.loads(lines[line - 1])))
        path.write_text("\n".join(lines) + "\n")
    return edit


def _bad_role(obj: dict) -> dict:
    [(sid, msgs)] = obj.items()
    msgs[3]["role"] = "narrator"
    return {sid: msgs}


BROKEN = {
    "unknown query type": (_edit_question(2, question_type="guess_the_weather"), QUESTIONS, 2, "question_type",
                           "is not one of the seven query types"),
    "three options": (_edit_question(3, all_options="['(a) x', '(b) y', '(c) z']"), QUESTIONS, 3, "all_options",
                      "expected four options"),
    "answer outside (a)-(d)": (_edit_question(4, correct_answer="(e)"), QUESTIONS, 4, "correct_answer",
                               "is not one of (a) (b) (c) (d)"),
    "unknown shared context": (_edit_question(5, shared_context_id="ctx-nobody"), QUESTIONS, 5,
                               "shared_context_id", "is not in the shared contexts file"),
    "end index past the context": (_edit_question(8, end_index_in_shared_context="11"), QUESTIONS, 8,
                                   "end_index_in_shared_context", "past the end of shared context"),
    "distance not a number": (_edit_question(1, distance_to_ref_in_tokens="far"), QUESTIONS, 1,
                              "distance_to_ref_in_tokens", "is not a whole number"),
    "missing question": (_edit_question(6, user_question_or_message=""), QUESTIONS, 6, "user_question_or_message",
                         "missing"),
    "duplicate question id": (_edit_question(7, question_id="fern-2"), QUESTIONS, 7, "question_id",
                              "duplicate question_id 'fern-2' (first at row 2)"),
    "message with an unknown role": (_edit_context(2, _bad_role), CONTEXTS, 2, "ctx-omar[3].role",
                                     "is not one of ['system', 'user', 'assistant']"),
    "context line with two keys": (_edit_context(3, lambda o: {**o, "extra": []}), CONTEXTS, 3, "shared_context_id",
                                   "exactly one key"),
    "duplicate context id": (_edit_context(3, lambda o: {"ctx-fern": next(iter(o.values()))}), CONTEXTS, 3,
                             "shared_context_id", "duplicate shared_context_id 'ctx-fern'"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_bad_row_names_its_file_row_and_field(tmp_path, case):
    edit, name, row, field, needle = BROKEN[case]
    folder = _copy(tmp_path)
    edit(folder)
    with pytest.raises(InputError) as err:
        read_release(folder, "32k")
    e = err.value
    assert Path(e.path).name == name and e.row == row and e.field == field, str(e)
    assert needle in str(e)
    # the same line reaches `perseval validate` through the benchmark's reader
    [line] = PersonaMem.validate_source(folder, PersonaMem.Params())
    assert f"row {row}" in line and f"'{field}'" in line


def test_a_missing_split_file_is_named(tmp_path):
    folder = _copy(tmp_path)
    (folder / QUESTIONS).unlink()
    [line] = PersonaMem.validate_source(folder, PersonaMem.Params())
    assert QUESTIONS in line and "missing" in line
    assert "shared_contexts_128k.jsonl" in PersonaMem.validate_source(SAMPLE, PersonaMem.Params(split="128k"))[0]


# --- answers and the rule judge -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ('{"answer": "c"}', "c"), ('{"answer": "(B)"}', "b"), ("I think <final_answer> (d)", "d"),
    ("The best is (a).", "a"), ("(a) or maybe (b)", None), ("b", "b"), ("no idea", None),
])
def test_the_answer_is_one_named_option(text, want):
    assert read_letter(text) == want


def _judge(inst: Instance, out: AgentOutput) -> dict[str, float | None]:
    judge = ChoiceJudge(ChoiceJudge.Params())
    judgments = asyncio.run(judge.judge(inst, out, JudgeBinding("persona_mem.choice")))
    return {s.metric: s.value for s in judge.score(inst, out, judgments)}


def test_the_rule_judge_scores_right_wrong_and_unusable_answers():
    inst = by_id(load())["pm-fern-2"]  # correct (c)
    ok = AgentOutput(inst.instance_id, "a", 0, '{"answer": "c"}', parsed={"choice": "c"})
    wrong = AgentOutput(inst.instance_id, "a", 0, '{"answer": "a"}', parsed={"choice": "a"})
    invalid = AgentOutput(inst.instance_id, "a", 0, "hmm", status="invalid", error="no single option")
    assert _judge(inst, ok) == {"accuracy": 100.0, "valid": 100.0}
    assert _judge(inst, wrong) == {"accuracy": 0.0, "valid": 100.0}
    assert _judge(inst, invalid) == {"accuracy": 0.0, "valid": 0.0}  # a scored miss, not unscored


# --- the agents' view of the context ---------------------------------------------------------------------------

def _docs(data) -> Callable[[str], list[Document]]:
    return lambda owner: [d for d in data.documents if d.owner == owner]


def test_the_long_context_agent_sees_only_messages_before_the_question():
    data = load()
    inst = by_id(data)["pm-lina-3"]  # end index 5: the first session only
    chat = ScriptedChat('{"answer": "c"}')
    agent = LongContextAgent(LongContextAgent.Params())
    out = asyncio.run(agent.act(inst, AgentContext(llm=chat, documents=_docs(data)), 0, "long"))
    sent = chat.calls[0]["messages"]
    assert len(sent) == 6 and sent[0]["role"] == "system" and "lamb stew" in sent[1]["content"]
    assert not any("vegetarian" in m["content"] for m in sent)  # message 6 comes after the question
    assert sent[-1]["role"] == "user" and "(c) Quick one-pot meals." in sent[-1]["content"]
    assert chat.calls[0]["json_schema"]["properties"]["answer"]["enum"] == ["a", "b", "c", "d"]
    assert out.status == "ok" and out.parsed == {"choice": "c"} and out.trace[0]["dropped"] == 0


def test_clipping_keeps_the_latest_whole_messages():
    msgs = [{"role": "user", "content": "x" * 40}, {"role": "assistant", "content": "y" * 40},
            {"role": "user", "content": "z" * 40}]
    kept, dropped = clip(msgs, 20)  # 80 characters
    assert [m["content"][0] for m in kept] == ["y", "z"] and dropped == 1
    assert clip(msgs, None) == (msgs, 0)


def test_under_a_swap_the_other_personas_context_is_cut_at_the_same_point():
    data = load()
    inst = by_id(data)["pm-lina-3"]
    theirs = visible(inst, _docs(data)("omar"))
    assert [d.meta["index"] for d in theirs] == [0, 1, 2, 3, 4] and theirs[0].owner == "omar"


def test_rag_keeps_only_passages_from_before_the_question():
    inst = by_id(load())["pm-omar-3"]  # end index 8
    passages = [Passage("ctx-omar#00010", 0, "late", 0.9), Passage("ctx-omar#00003", 0, "early", 0.8),
                Passage("ctx-omar#00007", 0, "edge", 0.7), Passage("ctx-omar#00008", 0, "at end", 0.6)]
    assert [p.text for p in before_question(inst, passages)] == ["early", "edge"]

    async def retrieve(owner, query, k):
        return passages

    chat = ScriptedChat('{"answer": "b"}')
    agent = SessionRagAgent(SessionRagAgent.Params(top_k=1))
    out = asyncio.run(agent.act(inst, AgentContext(llm=chat, retrieve=retrieve), 0, "rag"))
    prompt = chat.calls[0]["messages"][0]["content"]
    assert "- early" in prompt and "late" not in prompt and "edge" not in prompt and out.parsed == {"choice": "b"}
    assert SessionRagAgent(SessionRagAgent.Params(top_k=0)).requires() == frozenset({"llm"})


def test_the_oracle_answers_the_gold_and_the_request_format_asks_with_the_options():
    inst = by_id(load())["pm-omar-2"]
    out = asyncio.run(PersonaMemOracle(PersonaMemOracle.Params()).act(inst, AgentContext(), 0, "oracle"))
    assert out.parsed == {"choice": "c"} and _judge(inst, out)["accuracy"] == 100.0
    prompt = PersonaMemFormat().prompt(inst, [], 100)
    assert "(c) A pocket guide" in prompt.messages[0]["content"] and prompt.json_schema is not None


# --- the analysis against a hand-computed fixture -----------------------------------------------------------------

def _instance(iid: str, user: str, qtype: str, blocks: int, tokens: int) -> Instance:
    return Instance(iid, "persona_mem", user, qtype, "q", {"distance_blocks": blocks, "distance_tokens": tokens,
                                                          "options": ["a", "b", "c", "d"]}, {"answer": "a"})


FIXTURE = [_instance("i1", "u1", "recall_user_shared_facts", 0, 500),
           _instance("i2", "u1", "acknowledge_latest_user_preferences", 2, 9000),
           _instance("i3", "u2", "recall_user_shared_facts", 1, 3000),
           _instance("i4", "u2", "acknowledge_latest_user_preferences", 0, 100),
           _instance("i5", "u3", "suggest_new_ideas", 2, 40000),
           _instance("i6", "u3", "recall_user_shared_facts", 0, 1500)]


def _scores() -> pd.DataFrame:
    values = {("i1", 0): 100.0, ("i1", 1): 0.0, ("i2", 0): 0.0, ("i3", 0): 100.0, ("i4", 0): 100.0, ("i5", 0): 0.0,
              ("i6", 0): 0.0}
    users = {i.instance_id: (i.user_id, i.group) for i in FIXTURE}
    rows = []
    for (iid, rep), v in values.items():
        for metric, value in (("accuracy", v), ("valid", 100.0)):
            rows.append({"cell": "c", "agent": "A", "agent_kind": "k", "agent_params": "{}", "backbone": "m",
                         "retriever": "", "judge": "persona_mem.choice", "judge_model": "", "instance_id": iid,
                         "repeat": rep, "judge_repeat": 0, "group": users[iid][1], "metric": metric, "value": value,
                         "n_items": 1, "n_unscored": 0, "user_id": users[iid][0]})
    return pd.DataFrame(rows, columns=ANALYSIS_COLUMNS)


def test_accuracy_by_type_and_distance_match_the_hand_computed_fixture():
    tables = analyze(_scores(), FIXTURE)
    wide = tables["table_accuracy_by_type"]
    [row] = wide.to_dict("records")
    # i1 is the mean of its two repeats (50); recall: i1 50, i3 100, i6 0; ack: i2 0, i4 100; suggest: i5 0
    assert row == pytest.approx({"recall_user_shared_facts": 50.0, "acknowledge_latest_user_preferences": 50.0,
                                 "suggest_new_ideas": 0.0, "Overall": 250.0 / 6})
    assert list(wide.columns) == ["recall_user_shared_facts", "acknowledge_latest_user_preferences",
                                  "suggest_new_ideas", "Overall"]  # the paper's order
    long = tables["accuracy_by_type_ci"].set_index("question_type")
    assert long.loc["Overall", "n"] == 6 and long.loc["Overall", "n_users"] == 3
    assert long.loc["recall_user_shared_facts", "ci_low"] <= 50.0 <= long.loc["recall_user_shared_facts", "ci_high"]
    dist = tables["accuracy_by_distance"]
    blocks = dist[dist["measure"] == "sessions (blocks) back"].set_index("distance")["mean"].to_dict()
    tokens = dist[dist["measure"] == "tokens back"].set_index("distance")["mean"].to_dict()
    assert blocks == pytest.approx({"0": 50.0, "1": 100.0, "2": 0.0})  # 0: i1 50, i4 100, i6 0
    assert tokens == pytest.approx({"<2k": 50.0, "2k-8k": 100.0, "8k-32k": 0.0, "32k-128k": 0.0})
    assert list(tokens) == ["<2k", "2k-8k", "8k-32k", "32k-128k"]


@pytest.mark.parametrize("tokens, label", [(0, "<2k"), (1999, "<2k"), (2000, "2k-8k"), (127_999, "32k-128k"),
                                           (500_000, ">=128k")])
def test_distance_bins(tokens, label):
    assert distance_bin(tokens) == label


def test_stats_count_questions_per_type_topic_and_context():
    data = load()
    tables = PersonaMem(PersonaMem.Params()).stats(data.instances, data.documents)
    types = tables["questions_by_type"]
    assert types.loc["acknowledge_latest_user_preferences", "questions"] == 3
    assert types.loc["Overall", "questions"] == 10 and types.loc["Overall", "personas"] == 3
    assert tables["questions_by_topic"].loc["gardening", "questions"] == 4
    ctx = tables["contexts"].iloc[0]
    assert ctx["shared_contexts"] == 3 and ctx["messages"] == 34 and ctx["sessions_per_context"] == 2


def test_the_cpu_config_plans_the_agents_and_their_swapped_runs():
    plan = make_plan(load_experiment(experiment_file("persona_mem_cpu")))
    runs = {(r.agent.name, r.control.name if r.control else None) for r in plan.runs()}
    assert ("persona-mem-long-context", "swapped-history") in runs and ("persona-mem-rag", "swapped-history") in runs
    assert ("persona-mem-oracle", "swapped-history") not in runs and ("persona-mem-no-history", None) in runs
    assert {c.judge for c in plan.cells} == {"persona_mem.choice"}


def test_the_older_column_names_and_a_percentage_are_read(tmp_path):
    """The repository's older samples name the question `question`, have no persona_id (one persona per
    shared context) and write the proportion as a percentage."""
    folder = _copy(tmp_path)
    path = folder / QUESTIONS
    rows = list(csv.DictReader(path.open(newline="")))
    for r in rows:
        r["question"] = r.pop("user_question_or_message")
        r.pop("persona_id")
        r["distance_to_ref_proportion_in_context"] = "69.20%"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    inst = by_id(load(folder))["pm-fern-1"]
    assert inst.user_id == "ctx-fern" and inst.query.startswith("Could you suggest a theme")
    assert inst.payload["distance_to_ref_proportion_in_context"] == pytest.approx(0.692)
