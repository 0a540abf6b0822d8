"""PrefEval (`prefeval`): the official layout's loader and its errors (file, row, field), the conversation
the agents send (preference turns, inter-turns, question; clipping; swapped history), the error-type logic
and both judges on crafted answers, the analysis tables against a hand-computed fixture, stats, and the CPU
config's plan. The sample is tests/data/prefeval (hand-written, in the official layout)."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import ANALYSIS_COLUMNS, build_all
from perseval.benchmarks.prefeval.agents.oracle import PrefEvalOracle
from perseval.benchmarks.prefeval.agents.rag import PrefRagAgent
from perseval.benchmarks.prefeval.agents.zero_shot import ZeroShotAgent
from perseval.benchmarks.prefeval.analysis import analyze
from perseval.benchmarks.prefeval.answers import read_choice
from perseval.benchmarks.prefeval.card import REMINDER
from perseval.benchmarks.prefeval.benchmark import PrefEval
from perseval.benchmarks.prefeval.errors import Verdicts, classify
from perseval.benchmarks.prefeval.judges.classification import ClassificationJudge
from perseval.benchmarks.prefeval.judges.generation import GenerationJudge
from perseval.benchmarks.prefeval.loader import ACKNOWLEDGEMENT
from perseval.core.errors import InputError
from perseval.core.instances import CORPUS_OWNER, AgentOutput, Document, Instance, Passage
from perseval.judges.base import JudgeBinding
from perseval.pipeline.plan import make_plan
from perseval.experiment.load import load_experiment
from tests.scripted import ScriptedChat

from .conftest import REPO
from perseval.experiment.load import experiment_file

SAMPLE = REPO / "tests" / "data" / "prefeval"


def load(source: Path = SAMPLE, **params: Any):
    return build_all(PrefEval(PrefEval.Params(**params)), sample=100, seed=3, source=source)


def by_id(data) -> dict[str, Instance]:
    return {i.instance_id: i for i in data.instances}


# --- the layout, read ---------------------------------------------------------------------------------------

def test_the_sample_loads_every_form_task_and_setting_with_one_user_per_preference():
    data = load(inter_turns=[0, 2])
    assert len(data.instances) == 4 * 3 * 2 * 2  # preferences x forms x settings x tasks
    got = by_id(data)
    exp = got["pe-explicit-lifestyle_dietary-1-t2-gen"]
    imp = got["pe-implicit-persona-lifestyle_dietary-1-t2-gen"]
    assert exp.user_id == imp.user_id == "lifestyle_dietary-001" and exp.group == "lifestyle_dietary"
    assert exp.gold["preference"].startswith("I never eat anything made with dairy")
    docs = {d.doc_id: d for d in data.documents}
    assert docs[exp.payload["pref_doc"]].meta["messages"][1] == {"role": "assistant", "content": ACKNOWLEDGEMENT}
    choice = docs["lifestyle_dietary-001:implicit-choice:1"].meta["messages"]
    assert [m["role"] for m in choice] == ["user", "assistant", "user", "assistant"]
    assert choice[2]["content"].startswith("I will skip the chocolate")
    persona = docs["lifestyle_dietary-001:implicit-persona:1"].meta["messages"]
    assert len(persona) == 6 and persona[0]["content"].startswith("I bake bread at night")
    inter = sorted((d for d in data.documents if d.owner == CORPUS_OWNER), key=lambda d: d.meta["turn"])
    assert [d.doc_id for d in inter] == ["inter-0000", "inter-0001"]
    assert inter[1].meta["messages"][0]["content"].startswith("And for a firm one?")  # turns laid end to end


def test_classification_options_are_shuffled_with_the_seed_and_keep_the_right_letter():
    inst = by_id(load(inter_turns=[2]))["pe-explicit-travel_hotel-1-t2-mcq"]
    right = inst.payload["options"]["ABCD".index(inst.gold["answer"])]
    assert right.startswith("A seafront guesthouse that welcomes dogs")  # the file's first option
    again = by_id(load(inter_turns=[2]))[inst.instance_id]
    assert again.payload["options"] == inst.payload["options"]
    other = build_all(PrefEval(PrefEval.Params(inter_turns=[2])), sample=100, seed=4, source=SAMPLE)
    assert sorted(by_id(other)[inst.instance_id].payload["options"]) == sorted(inst.payload["options"])


def test_sample_keeps_whole_preferences():
    data = build_all(PrefEval(PrefEval.Params(inter_turns=[1])), sample=1, seed=9, source=SAMPLE)
    assert len({i.user_id for i in data.instances}) == 1 and len(data.instances) == 3 * 2
    assert {d.owner for d in data.documents} == {data.instances[0].user_id, CORPUS_OWNER}


# --- broken rows: each names file, row and field -----------------------------------------------------------

def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "pe"
    shutil.copytree(SAMPLE, folder)
    return folder


def _edit(rel: str, change: Callable[[list], Any]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / rel
        rows = json.loads(path.read_text())
        change(rows)
        path.write_text(json.dumps(rows))
    return edit


EXPLICIT = "explicit_preference/travel_hotel.json"
CHOICE = "implicit_preference/choice-based/lifestyle_dietary.json"
PERSONA = "implicit_preference/persona-driven/travel_hotel.json"
MCQ = "mcq_options/lifestyle_dietary.json"
INTER = "filtered_inter_turns.json"
BROKEN = {
    "explicit row without a preference": (_edit(EXPLICIT, lambda r: r[1].pop("preference")), EXPLICIT, 2,
                                          "preference", "missing"),
    "question not a string": (_edit(EXPLICIT, lambda r: r[0].update(question=["x"])), EXPLICIT, 1, "question",
                              "expected a string"),
    "choice conversation without the selection": (_edit(CHOICE, lambda r: r[0]["conversation"].pop("user_selection")),
                                                  CHOICE, 1, "conversation.user_selection", "missing"),
    "persona turn with a bad key": (_edit(PERSONA, lambda r: r[1]["conversation"].update(step3={"user": "u",
                                                                                             "assistant": "a"})),
                                    PERSONA, 2, "conversation.step3", "unknown key"),
    "persona turn without the assistant": (_edit(PERSONA, lambda r: r[0]["conversation"]["turn2"].pop("assistant")),
                                           PERSONA, 1, "conversation.turn2.assistant", "missing"),
    "three classification options": (_edit(MCQ, lambda r: r[1]["classification_task_options"].pop()), MCQ, 2,
                                     "classification_task_options", "four non-empty strings"),
    "two equal options": (_edit(MCQ, lambda r: r[0]["classification_task_options"].__setitem__(
        2, r[0]["classification_task_options"][1])), MCQ, 1, "classification_task_options", "the same text"),
    "inter-turn message without a role": (_edit(INTER, lambda r: r[1]["conversation"][0].pop("role")), INTER, 2,
                                          "conversation[0]", "expected {role: user|assistant"),
    "row not an object": (_edit(EXPLICIT, lambda r: r.__setitem__(0, "just text")), EXPLICIT, 1, None,
                          "expected an object"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_bad_row_names_its_file_row_and_field(tmp_path, case):
    edit, rel, row, field, needle = BROKEN[case]
    folder = _copy(tmp_path)
    edit(folder)
    params = PrefEval.Params(inter_turns=[4])
    with pytest.raises(InputError) as err:
        PrefEval.read_source(folder, params)
    e = err.value
    assert Path(e.path) == folder / rel and e.row == row and e.field == field, str(e)
    assert needle in str(e)
    [line] = PrefEval.validate_source(folder, params)
    assert rel.split("/")[-1] in line and f"row {row}" in line


def test_too_few_inter_turns_and_a_missing_form_folder_are_named(tmp_path):
    [line] = PrefEval.validate_source(SAMPLE, PrefEval.Params(inter_turns=[5]))
    assert INTER in line and "holds 4 turns; the inter-turn setting asks for 5" in line
    folder = _copy(tmp_path)
    shutil.rmtree(folder / "implicit_preference" / "persona-driven")
    [line] = PrefEval.validate_source(folder, PrefEval.Params(inter_turns=[1]))
    assert "persona-driven/travel_hotel.json" in line or "persona-driven" in line
    swapped = _copy(tmp_path / "b")
    _edit(INTER, lambda r: r[0]["conversation"].reverse())(swapped)
    [line] = PrefEval.validate_source(swapped, PrefEval.Params(inter_turns=[1]))
    assert "row 1" in line and "conversation[0].role" in line


# --- the conversation the agents send ----------------------------------------------------------------------

def _docs(data) -> Callable[[str], list[Document]]:
    return lambda owner: [d for d in data.documents if d.owner == owner]


def test_zero_shot_sends_preference_turns_then_the_inter_turns_then_the_question():
    data = load(inter_turns=[2])
    inst = by_id(data)["pe-implicit-choice-lifestyle_dietary-2-t2-gen"]
    chat = ScriptedChat("Roast chicken with lemon and herbs.")
    out = asyncio.run(ZeroShotAgent(ZeroShotAgent.Params()).act(inst, AgentContext(llm=chat, documents=_docs(data)),
                                                                 0, "zs"))
    sent = chat.calls[0]["messages"]
    assert len(sent) == 4 + 2 * 2 + 1
    assert sent[0]["content"].startswith("What sauces could I keep") and sent[4]["content"].startswith("How many minutes")
    limit = " (Please respond within 300 words.)"  # the official scripts' length request, N = max_tokens
    assert sent[-1] == {"role": "user", "content": inst.query + limit} and chat.calls[0]["json_schema"] is None
    assert chat.calls[0]["max_tokens"] == 300 and out.status == "ok" and out.parsed is None
    reminded = ScriptedChat("ok")
    asyncio.run(ZeroShotAgent(ZeroShotAgent.Params(reminder=True)).act(
        inst, AgentContext(llm=reminded, documents=_docs(data)), 0, "rem"))
    assert reminded.calls[0]["messages"][-1]["content"] == f"{inst.query}{limit}\n\n{REMINDER}"
    unlimited = ScriptedChat("ok")
    asyncio.run(ZeroShotAgent(ZeroShotAgent.Params(word_limit=False)).act(
        inst, AgentContext(llm=unlimited, documents=_docs(data)), 0, "off"))
    assert unlimited.calls[0]["messages"][-1]["content"] == inst.query


def test_clipping_drops_the_oldest_inter_turns_never_the_preference():
    data = load(inter_turns=[2])
    inst = by_id(data)["pe-explicit-travel_hotel-2-t2-mcq"]
    chat = ScriptedChat('{"choice": "A"}')
    pref_chars = len(inst.gold["preference"]) + len(ACKNOWLEDGEMENT)
    tokens = (pref_chars + 100) // 4  # room for the second inter-turn (62 characters) only
    out = asyncio.run(ZeroShotAgent(ZeroShotAgent.Params(context_tokens=tokens)).act(
        inst, AgentContext(llm=chat, documents=_docs(data)), 0, "zs"))
    sent = chat.calls[0]["messages"]
    assert sent[0]["content"] == inst.gold["preference"] and sent[2]["content"] == "And for a firm one?"
    assert out.trace[0]["inter_turns_dropped"] == 1 and out.parsed == {"choice": "A"}
    assert "A. " in sent[-1]["content"] and chat.calls[0]["json_schema"]["properties"]["choice"]["enum"] == list("ABCD")


def test_under_a_swap_the_agent_gets_the_other_users_preference_turns_of_the_same_form():
    data = load(inter_turns=[0])
    inst = by_id(data)["pe-explicit-travel_hotel-1-t0-gen"]
    other = "lifestyle_dietary-002"
    chat = ScriptedChat("A hotel.")
    swapped = lambda owner: _docs(data)(other if owner == inst.user_id else owner)  # noqa: E731
    asyncio.run(ZeroShotAgent(ZeroShotAgent.Params()).act(inst, AgentContext(llm=chat, documents=swapped), 0, "zs"))
    assert chat.calls[0]["messages"][0]["content"] == "I avoid very spicy food; chilli gives me heartburn."


def test_rag_keeps_the_instances_form_and_setting_and_merges_by_score():
    inst = by_id(load(inter_turns=[1]))["pe-explicit-lifestyle_dietary-1-t1-gen"]
    user = [Passage("lifestyle_dietary-001:explicit:1", 0, "the preference", 0.5),
            Passage("lifestyle_dietary-001:implicit-choice:1", 0, "other form", 0.9)]
    corpus = [Passage("inter-0000", 0, "first inter-turn", 0.7), Passage("inter-0003", 0, "beyond the setting", 0.95)]

    async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
        return corpus if owner == CORPUS_OWNER else user

    chat = ScriptedChat("Oat milk banana bread.")
    out = asyncio.run(PrefRagAgent(PrefRagAgent.Params(top_k=5)).act(inst, AgentContext(llm=chat, retrieve=retrieve),
                                                                      0, "rag"))
    prompt = chat.calls[0]["messages"][0]["content"]
    assert "1. first inter-turn\n2. the preference" in prompt
    assert "other form" not in prompt and "beyond the setting" not in prompt and out.status == "ok"


# --- the error types, hand-checked against the paper's rules ------------------------------------------------

@pytest.mark.parametrize("ack, hall, viol, helpful, want", [
    (True, False, False, True, "follows"),
    (False, None, False, True, "follows"),  # no violation, helpful: follows even without acknowledging
    (False, None, True, True, "unaware_violation"),
    (True, True, True, True, "hallucination_violation"),
    (True, False, True, True, "inconsistent_violation"),
    (True, True, False, True, "follows"),  # states a wrong preference but violates nothing
    (True, False, True, False, "unhelpful"),  # unhelpful wins: the violation types need a helpful answer
    (False, None, False, False, "unhelpful"),
])
def test_each_response_has_at_most_one_error_type(ack, hall, viol, helpful, want):
    flags = classify(Verdicts(ack, hall, viol, helpful))
    assert flags is not None
    kinds = [k for k in ("unhelpful", "inconsistent_violation", "hallucination_violation", "unaware_violation")
             if flags[k]]
    assert kinds == ([] if want == "follows" else [want]) and flags["follows"] == (want == "follows")


def test_an_unanswered_check_leaves_the_response_unscored():
    assert classify(Verdicts(None, None, False, True)) is None
    assert classify(Verdicts(True, None, False, True)) is None  # acknowledges: hallucination is needed
    assert classify(Verdicts(False, None, False, True)) is not None  # not acknowledging: it is not


def _answers(verdicts: dict[str, Any]) -> Callable[[list[dict]], str]:
    """A judge model that answers each check by the question it is asked."""
    keys = {"mention, or clearly assume": "acknowledges", "DIFFERENT from": "hallucinates",
            "goes against the user's preference": "violates", "actually try to answer": "helpful"}

    def answer(messages: list[dict]) -> str:
        check = next(v for k, v in keys.items() if k in messages[-1]["content"])
        value = verdicts[check]
        return value if isinstance(value, str) else json.dumps({"verdict": value, "reason": "r"})
    return answer


def _judge_gen(verdicts: dict[str, Any], status: str = "ok") -> tuple[dict[str, float | None], ScriptedChat]:
    inst = by_id(load(inter_turns=[0]))["pe-explicit-lifestyle_dietary-1-t0-gen"]
    out = AgentOutput(inst.instance_id, "a", 0, "Try a butter cake.", status=status)  # type: ignore[arg-type]
    chat = ScriptedChat(_answers(verdicts))
    judge = GenerationJudge(GenerationJudge.Params())
    judgments = asyncio.run(judge.judge(inst, out, JudgeBinding("j", chat)))
    scores = judge.score(inst, out, judgments)
    return {s.metric: s.value for s in scores}, chat


def test_the_generation_judge_turns_four_checks_into_the_error_types():
    got, chat = _judge_gen({"acknowledges": True, "hallucinates": False, "violates": True, "helpful": True})
    assert got == {"accuracy": 0.0, "unhelpful": 0.0, "inconsistent_violation": 100.0,
                   "hallucination_violation": 0.0, "unaware_violation": 0.0, "acknowledgement": 100.0}
    assert len(chat.calls) == 4 and "I never eat anything made with dairy" in chat.calls[1]["messages"][-1]["content"]
    got, chat = _judge_gen({"acknowledges": False, "hallucinates": True, "violates": False, "helpful": True})
    assert got["accuracy"] == 100.0 and got["acknowledgement"] == 0.0
    assert len(chat.calls) == 3  # no hallucination check for a response that states no preference


def test_an_unreadable_judge_answer_is_unscored_and_an_invalid_output_is_a_miss_without_calls():
    got, _ = _judge_gen({"acknowledges": "I am not sure", "violates": False, "helpful": True, "hallucinates": False})
    assert all(v is None for v in got.values())
    got, chat = _judge_gen({}, status="invalid")
    assert got["accuracy"] == 0.0 and got["unhelpful"] == 100.0 and chat.calls == []


def test_the_classification_judge_and_the_oracle():
    inst = by_id(load(inter_turns=[0]))["pe-implicit-persona-travel_hotel-2-t0-mcq"]
    judge = ClassificationJudge(ClassificationJudge.Params())

    def score(out: AgentOutput) -> dict[str, float | None]:
        js = asyncio.run(judge.judge(inst, out, JudgeBinding("prefeval.classification")))
        return {s.metric: s.value for s in judge.score(inst, out, js)}

    oracle = asyncio.run(PrefEvalOracle(PrefEvalOracle.Params()).act(inst, AgentContext(), 0, "o"))
    assert score(oracle) == {"mcq_accuracy": 100.0, "valid": 100.0}
    wrong = next(x for x in "ABCD" if x != inst.gold["answer"])
    assert score(AgentOutput(inst.instance_id, "a", 0, f"<choice>{wrong}</choice>")) == {"mcq_accuracy": 0.0,
                                                                                        "valid": 100.0}
    assert score(AgentOutput(inst.instance_id, "a", 0, "", status="invalid")) == {"mcq_accuracy": 0.0, "valid": 0.0}
    gen = by_id(load(inter_turns=[0]))["pe-explicit-travel_hotel-2-t0-gen"]
    assert asyncio.run(PrefEvalOracle(PrefEvalOracle.Params()).act(gen, AgentContext(), 0, "o")).status == "invalid"


@pytest.mark.parametrize("text, want", [('{"choice": "C"}', "C"), ("<choice>b</choice>", "B"), ("D", "D"),
                                        ("A or B", None), ("none", None)])
def test_a_choice_is_one_letter(text, want):
    assert read_choice(text) == want


# --- the analysis against a hand-computed fixture -----------------------------------------------------------------

def _inst(iid: str, user: str, form: str, turns: int) -> Instance:
    return Instance(iid, "prefeval", user, "t", "q", {"form": form, "inter_turns": turns, "task": "generation",
                                                     "pref_doc": f"{user}:{form}:1"}, {"preference": "p"})


FIXTURE = [_inst("g1", "u1", "explicit", 10), _inst("g2", "u2", "explicit", 10), _inst("g3", "u1", "explicit", 300),
           _inst("g4", "u2", "explicit", 300), _inst("g5", "u1", "implicit-choice", 10),
           _inst("g6", "u2", "implicit-choice", 10)]
# per instance: (follows, error type or None); g6's judge could not answer: unscored (None everywhere)
OUTCOMES = {"g1": (1, None), "g2": (0, "unaware_violation"), "g3": (0, "unhelpful"), "g4": (0, "unaware_violation"),
            "g5": (1, None), "g6": None}


def _scores() -> pd.DataFrame:
    rows = []
    for iid, outcome in OUTCOMES.items():
        user = next(i.user_id for i in FIXTURE if i.instance_id == iid)
        for metric in ("accuracy", "unhelpful", "inconsistent_violation", "hallucination_violation",
                       "unaware_violation"):
            if outcome is None:
                value = None
            elif metric == "accuracy":
                value = 100.0 * outcome[0]
            else:
                value = 100.0 * (outcome[1] == metric)
            rows.append({"cell": "c", "agent": "A", "agent_kind": "k", "agent_params": "{}", "backbone": "m",
                         "retriever": "", "judge": "j", "judge_model": "m", "instance_id": iid, "repeat": 0,
                         "judge_repeat": 0, "group": "t", "metric": metric, "value": value, "n_items": 4,
                         "n_unscored": 4 if value is None else 0, "user_id": user})
    return pd.DataFrame(rows, columns=ANALYSIS_COLUMNS)


def test_accuracy_and_error_types_per_setting_match_the_hand_computed_fixture():
    tables = analyze(_scores(), FIXTURE)
    [row] = tables["table_generation_accuracy"].to_dict("records")
    # explicit/10: g1 100, g2 0; explicit/300: g3 0, g4 0; choice/10: g5 100 (g6 unscored, left out)
    assert row == pytest.approx({"explicit / 10 turns": 50.0, "explicit / 300 turns": 0.0,
                                 "implicit-choice / 10 turns": 100.0, "Overall": 40.0})
    assert list(tables["table_generation_accuracy"].columns) == ["explicit / 10 turns", "explicit / 300 turns",
                                                                 "implicit-choice / 10 turns", "Overall"]
    errors = tables["error_types"].loc["A / m / j"]
    assert errors.loc["explicit / 300 turns"].to_dict() == pytest.approx(
        {"unhelpful": 50.0, "inconsistent_violation": 0.0, "hallucination_violation": 0.0, "unaware_violation": 50.0,
         "accuracy": 0.0})
    assert errors.loc["Overall", "unaware_violation"] == pytest.approx(40.0)
    ci = tables["generation_accuracy_ci"].set_index("setting")
    assert ci.loc["Overall", "n"] == 5 and ci.loc["Overall", "n_users"] == 2
    assert "table_classification_accuracy" not in tables


def test_stats_count_preferences_per_topic_and_instances_per_setting():
    data = load(inter_turns=[0, 2])
    tables = PrefEval(PrefEval.Params(inter_turns=[2])).stats(data.instances, data.documents)
    topics = tables["preferences_by_topic"]
    assert topics.loc["travel_hotel", "preferences"] == 2 and topics.loc["travel_hotel", "preferences (explicit)"] == 2
    setting = tables["instances_by_setting"]
    assert setting.loc[("generation", "explicit", 2), "instances"] == 4
    longer = setting.loc[("generation", "explicit", 2), "context_chars_mean"]
    assert longer > setting.loc[("generation", "explicit", 0), "context_chars_mean"]


def test_the_cpu_config_plans_both_judges_and_the_swapped_runs():
    plan = make_plan(load_experiment(experiment_file("prefeval_cpu")))
    runs = {(r.agent.name, r.control.name if r.control else None) for r in plan.runs()}
    assert ("prefeval-zero-shot", "swapped-history") in runs and ("prefeval-rag", "swapped-history") in runs
    assert ("prefeval-no-history", "swapped-history") not in runs and ("prefeval-oracle", "swapped-history") not in runs
    assert {c.judge for c in plan.cells} == {"smollm2-judge", "prefeval.classification"}


def test_files_pair_by_row_as_the_official_scripts_read_them(tmp_path):
    """Row i of every form and of mcq_options is one preference even when a file rewords it slightly; a
    topic whose mcq file is shorter has no classification instance for the rows it lacks (counted)."""
    folder = _copy(tmp_path)
    _edit(MCQ, lambda r: r[0].update(preference="I absolutely never eat anything made with dairy."))(folder)
    _edit("mcq_options/travel_hotel.json", lambda r: r.pop())(folder)
    data = build_all(PrefEval(PrefEval.Params(inter_turns=[0])), sample=100, seed=3, source=folder)
    got = by_id(data)
    assert "pe-implicit-choice-lifestyle_dietary-1-t0-mcq" in got
    assert got["pe-explicit-lifestyle_dietary-1-t0-mcq"].user_id == "lifestyle_dietary-001"
    assert "pe-explicit-travel_hotel-2-t0-mcq" not in got and "pe-explicit-travel_hotel-2-t0-gen" in got
    assert data.info["release"]["rows_without_mcq_options"] == 3  # travel_hotel row 2, in each of the three forms


def test_the_manifest_keeps_the_release_counts_and_the_sample_counts_apart():
    """`release`: the selected release before sampling (every preference, every instance of each form);
    `sample`: what the entry's `sample` kept. Never one flat mix of both."""
    whole, one = load(inter_turns=[2]), build_all(PrefEval(PrefEval.Params(inter_turns=[2])), sample=1, seed=3,
                                                  source=SAMPLE)
    assert one.info["release"] == whole.info["release"]  # the release does not depend on the sample
    release, sample = one.info["release"], one.info["sample"]
    assert release["instances"] == len(whole.instances) and sum(release["by_form"].values()) == len(whole.instances)
    assert release["preferences"] == len({i.user_id for i in whole.instances})
    assert sample["preferences"] == 1 == len({i.user_id for i in one.instances})
    assert sample["instances"] == len(one.instances) < release["instances"]
    assert sum(sample["by_form"].values()) == len(one.instances) == sum(sample["by_task"].values())
    assert sample["documents"] == len(one.documents)
    assert not {"instances", "users", "by_form", "preferences"} & set(one.info)
