"""LaMP from the hand-written sample in the official layout (perseval/benchmarks/lamp/sample): the loader and its row errors,
the paper's prompts and retrieval queries, the one answer extraction, and every metric against an
independent implementation (scikit-learn; the rouge-score package)."""
from __future__ import annotations

import asyncio
import json
import math
import shutil
from pathlib import Path

import pytest
from rouge_score import rouge_scorer
from sklearn.metrics import accuracy_score, f1_score, mean_absolute_error, mean_squared_error

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import build_all
from perseval.benchmarks.lamp.analysis import f1_rows, paper_table
from perseval.benchmarks.profile_questions import intervals
from perseval.benchmarks.lamp.answers import extract, read_label
from perseval.benchmarks.lamp.layout import TASKS
from perseval.benchmarks.lamp.metrics import macro_f1
from perseval.benchmarks.lamp.prompts import with_profile
from perseval.core.errors import InputError
from perseval.core.instances import AgentOutput, Passage
from perseval.judges.base import JudgeBinding
from perseval.pipeline.controls import derangement
from perseval.kernel.registry import agent_class, benchmark_class, judge_class
from tests.conftest import REPO

DATA = REPO / "perseval" / "benchmarks" / "lamp" / "sample"
Lamp = benchmark_class("lamp")


def build(**params):
    bench = Lamp(Lamp.Params(**params))
    return bench, build_all(bench, sample=10, seed=1, source=DATA)


# --- metrics against scikit-learn (ROUGE: tests/test_rouge.py) ------------------------------------------

def test_macro_f1_and_accuracy_equal_scikit_learn_with_answers_outside_the_labels():
    labels = TASKS["LaMP-2"].labels
    golds = ["sci-fi", "romance", "comedy", "sci-fi", "true story", "violence", "romance", "classic"]
    preds = ["sci-fi", "comedy", "comedy", None, "true story", "romance", "romance", "sci-fi"]
    index = lambda x: labels.index(x) if x in labels else -1  # noqa: E731 (the official mapping)
    want = f1_score([index(g) for g in golds], [index(p) for p in preds], labels=list(range(len(labels))),
                    average="macro", zero_division=0)
    assert macro_f1(golds, preds, labels) == pytest.approx(want, abs=1e-12)
    judge = judge_class("lamp.rule")(judge_class("lamp.rule").Params())
    hits = [judge_values("classification", g, p)["accuracy"] for g, p in zip(golds, preds)]
    assert sum(hits) / len(hits) / 100 == pytest.approx(accuracy_score(golds, [p or "-" for p in preds]))


def judge_values(kind, gold, answer):
    from perseval.benchmarks.lamp.judges.rule import values
    return values(kind, gold, answer)


def test_rating_errors_give_scikit_learns_mae_and_rmse_with_the_official_rule_for_non_numbers():
    golds = ["5", "1", "3", "4", "2", "3"]
    answers = ["4", "1", None, "2", None, "5"]  # None: no rating in the answer -> the worse of 1 and 5
    official = [4, 1, 5, 2, 5, 5]  # gold 3 is as far from 1 as from 5: the official rule gives 5; gold 2 -> 5
    rows = [judge_values("rating", g, a) for g, a in zip(golds, answers)]
    y = [float(g) for g in golds]
    assert sum(r["abs_error"] for r in rows) / len(rows) == pytest.approx(mean_absolute_error(y, official))
    rmse = math.sqrt(sum(r["squared_error"] for r in rows) / len(rows))
    assert rmse == pytest.approx(math.sqrt(mean_squared_error(y, official)))
    assert [r["valid"] for r in rows] == [100.0, 100.0, 0.0, 100.0, 0.0, 100.0]
    assert rows[0]["score"] == 75.0 and rows[1]["score"] == 100.0


# --- the loader -----------------------------------------------------------------------------------------

def test_the_sample_loads_every_task_as_users_with_their_profiles():
    bench, data = build()
    Lamp.check_instances(data.instances, "sample")
    assert {i.group for i in data.instances} == {"LaMP-1", "LaMP-2", "LaMP-3", "LaMP-4", "LaMP-5", "LaMP-7"}
    assert len(data.instances) == 18 == len({i.user_id for i in data.instances})
    owners = {d.owner for d in data.documents}
    assert owners == {i.user_id for i in data.instances}
    first = next(i for i in data.instances if i.group == "LaMP-1")
    # the paper's LaMP-1 query: the two candidate references' titles
    assert first.query == "Long-read sequencing error correction with transformers Medieval trade routes in the Baltic"
    assert first.gold == {"output": "[1]"}
    movie = next(d for d in data.documents if d.owner.startswith("LaMP-2"))
    assert movie.text.startswith('the tag for the movie: "') and movie.text.endswith('" is "sci-fi"')
    assert bench.stats(data.instances, data.documents)["questions_by_task"].loc["LaMP-3", "questions"] == 3


def test_the_build_streams_one_task_at_a_time_in_parts_of_whole_profiles(monkeypatch):
    """The construct stage receives LaMP in parts (a task's file at a time, BATCH questions each, in
    instance-id order): together they are the build in one piece, sorted as the stage sorts it, with its info."""
    import perseval.benchmarks.lamp.benchmark as lamp_module

    monkeypatch.setattr(lamp_module, "BATCH", 2)
    bench = Lamp(Lamp.Params(tasks=["LaMP-4", "LaMP-2", "LaMP-3"]))
    whole = bench.build(sample=10, seed=1, source=DATA)

    async def parts():
        return [b async for b in bench.batches(sample=10, seed=1, source=DATA)]

    batches = asyncio.run(parts())
    assert [len(b.instances) for b in batches] == [2, 1, 2, 1, 2, 1, 0] and batches[-1].info == whole.info
    for b in batches:
        assert {d.owner for d in b.documents} == {i.user_id for i in b.instances}  # a profile travels whole
    streamed = [i for b in batches for i in b.instances]
    assert streamed == sorted(whole.instances, key=lambda i: i.instance_id)
    assert sorted([d for b in batches for d in b.documents], key=lambda d: d.doc_id) == \
        sorted(whole.documents, key=lambda d: d.doc_id)


def test_the_time_based_split_reads_the_time_folder_with_dates():
    _, data = build(setting="time", tasks=["LaMP-3"])
    assert [i.instance_id for i in data.instances] == ["lamp-3-time-dev-301", "lamp-3-time-dev-311",
                                                       "lamp-3-time-dev-321"]
    assert all(d.timestamp.startswith("2019-") for d in data.documents)


def test_lamp_6_is_not_in_the_defaults_and_is_read_only_where_source_holds_it():
    assert "LaMP-6" not in Lamp.Params().tasks
    problems = Lamp.validate_source(DATA, Lamp.Params(tasks=["LaMP-6"]))
    assert len(problems) == 1 and "LaMP_6" in problems[0] and "missing" in problems[0]


def broken(tmp_path: Path, task: str, edit) -> list[str]:
    root = tmp_path / "lamp"
    shutil.copytree(DATA, root)
    folder = root / task.replace("-", "_") / "dev"
    edit(folder)
    return Lamp.validate_source(root, Lamp.Params(tasks=[task]))


def _rewrite(path: Path, change) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


@pytest.mark.parametrize("task, file, change, needle", [
    ("LaMP-2", "dev_questions.json", lambda v: v[1]["profile"][2].pop("tag"), "row 2, field 'profile[2].tag'"),
    ("LaMP-3", "dev_questions.json", lambda v: v[0]["profile"][0].update(score="6"), "row 1, field 'profile[0].score'"),
    ("LaMP-4", "dev_questions.json", lambda v: v[2].update(input=""), "row 3, field 'input'"),
    ("LaMP-1", "dev_questions.json", lambda v: v[0].update(profile="none"), "row 1, field 'profile'"),
    ("LaMP-1", "dev_outputs.json", lambda v: v["golds"][1].update(output="[3]"), "row 2, field 'output'"),
    ("LaMP-5", "dev_outputs.json", lambda v: v["golds"].pop(), "row 3, field 'id'"),
    ("LaMP-7", "dev_outputs.json", lambda v: v.update(task="LaMP_4"), "field 'task'"),
])
def test_a_bad_row_is_named_by_file_row_and_field(tmp_path, task, file, change, needle):
    problems = broken(tmp_path, task, lambda folder: _rewrite(folder / file, change))
    assert len(problems) == 1 and file in problems[0] and needle in problems[0], problems


def test_a_file_that_is_not_json_names_its_line(tmp_path):
    problems = broken(tmp_path, "LaMP-3", lambda f: (f / "dev_questions.json").write_text('[\n{"id": 1,\n'))
    assert len(problems) == 1 and "dev_questions.json" in problems[0] and "not JSON" in problems[0]


# --- prompts and the answer extraction ------------------------------------------------------------------

def test_the_paper_prompts_put_the_items_in_each_tasks_pattern():
    _, data = build()
    by_task = {i.group: i for i in reversed(data.instances)}  # the first question of each task
    fmt = Lamp.request_format
    for task, inst in by_task.items():
        docs = [d for d in data.documents if d.owner == inst.user_id][:2]
        prompt = fmt.prompt(inst, [Passage(d.doc_id, 0, d.text, 1.0) for d in docs] * 2, 10_000)  # a chunk twice
        text = prompt.messages[0]["content"]
        assert text.count(docs[0].text) == 1 and docs[1].text in text  # one passage per profile item
        assert (prompt.json_schema is None) == (TASKS[task].kind == "generation")
    one = by_task["LaMP-1"]
    assert with_profile("LaMP-1", one.payload["input"], ['"A"', '"B"']).startswith(
        'For an author who has written the paper with the title, and "A", and "B" "')
    assert with_profile("LaMP-7", "Paraphrase: x", ['"t1"']) == \
        '"t1" are written by a person. Following the given patterns Paraphrase: x'
    assert with_profile("LaMP-4", "Generate: x", []) == "Generate: x"


@pytest.mark.parametrize("task, text, label", [
    ("LaMP-1", '{"answer": "[2]"}', "[2]"), ("LaMP-1", "[1]", "[1]"), ("LaMP-1", "The answer is [2].", "[2]"),
    ("LaMP-1", "[1] or [2]", None), ("LaMP-2", "Dark comedy", "dark comedy"),
    ("LaMP-2", "It is a dark comedy.", "dark comedy"), ("LaMP-2", "comedy and romance", None),
    ("LaMP-2", "horror", None), ("LaMP-3", "4", "4"), ("LaMP-3", "I'd say 2 stars", "2"), ("LaMP-3", "5.0", "5"),
    ("LaMP-3", "10 out of 10", None), ("LaMP-3", '{"answer": "3"}', "3"),
])
def test_read_label(task, text, label):
    assert read_label(TASKS[task], text) == label


def test_an_unusable_answer_is_a_problem_and_the_rule_judge_scores_it_a_miss():
    _, data = build(tasks=["LaMP-3", "LaMP-7"])
    rating, tweet = data.instances[0], data.instances[3]
    assert extract(rating, "no idea").problem and extract(tweet, "  ").problem
    judge = judge_class("lamp.rule")(judge_class("lamp.rule").Params())
    out = AgentOutput(rating.instance_id, "a", 0, "no idea", status="invalid", error="no label")
    js = asyncio.run(judge.judge(rating, out, JudgeBinding("rule")))
    scores = {s.metric: s.value for s in judge.score(rating, out, js)}
    gold = float(rating.gold["output"])
    assert scores["abs_error"] == abs((1.0 if abs(1 - gold) > abs(5 - gold) else 5.0) - gold)
    assert scores["valid"] == 0.0 and "rouge1" not in scores


# --- agents, the control and the analysis -----------------------------------------------------------------

def test_random_k_draws_k_distinct_items_of_the_users_profile_reproducibly():
    _, data = build(tasks=["LaMP-1"])
    inst = data.instances[2]
    sent = []

    class Echo:
        async def chat(self, messages, json_schema=None, max_tokens=0, repeat=0):
            from perseval.llm.base import ChatResult
            sent.append(messages[0]["content"])
            return ChatResult(text='{"answer": "[1]"}')

    agent = agent_class("random_k")(agent_class("random_k").Params(top_k=2))
    docs = lambda owner: [d for d in data.documents if d.owner == owner]  # noqa: E731
    ctx = AgentContext(llm=Echo(), request_format=Lamp.request_format, documents=docs, seed=7)
    outs = [asyncio.run(agent.act(inst, ctx, 0, "random")) for _ in range(2)]
    assert sent[0] == sent[1] and outs[0].parsed == {"answer": "[1]"}
    shown = [d.text for d in docs(inst.user_id) if d.text in sent[0]]
    assert len(shown) == 2


def test_the_swapped_history_control_pairs_users_of_the_same_task():
    _, data = build()
    swap = derangement(data.instances, seed=3)
    task = {i.user_id: i.group for i in data.instances}
    assert all(task[u] == task[v] and u != v for u, v in swap.items()) and len(swap) == 18


def test_the_paper_table_has_each_tasks_metrics_and_the_f1_from_the_answered_labels():
    import pandas as pd
    _, data = build(tasks=["LaMP-2", "LaMP-3", "LaMP-4"])
    judge = judge_class("lamp.rule")(judge_class("lamp.rule").Params())
    answers = {"LaMP-2": ["sci-fi", "comedy", None], "LaMP-3": ["5", "2", "3"],
               "LaMP-4": ["Bike parking at stations", "", "High tides flood the harbour"]}
    rows, judged = [], []
    for task, given in answers.items():
        for inst, a in zip([i for i in data.instances if i.group == task], given):
            out = AgentOutput(inst.instance_id, "x", 0, a or "", parsed={"answer": a} if a else None,
                              status="ok" if a else "invalid")
            js = asyncio.run(judge.judge(inst, out, JudgeBinding("lamp.rule")))
            judged += [{**j.__dict__, "agent": "x", "backbone": "m", "retriever": "-", "judge": "lamp.rule"} for j in js]
            rows += [{"agent": "x", "backbone": "m", "retriever": "-", "judge": "lamp.rule", "instance_id": s.instance_id,
                      "group": inst.group, "metric": s.metric, "value": s.value, "user_id": inst.user_id}
                     for s in judge.score(inst, out, js)]
    long = intervals(pd.DataFrame(rows))
    table = paper_table(long, f1_rows(pd.DataFrame(judged), data.instances))
    assert list(table.columns) == ["LaMP-2 Accuracy", "LaMP-2 F1", "LaMP-3 MAE", "LaMP-3 RMSE", "LaMP-4 ROUGE-1",
                                   "LaMP-4 ROUGE-L"]
    golds2 = [i.gold["output"] for i in data.instances if i.group == "LaMP-2"]
    labels = list(TASKS["LaMP-2"].labels)
    idx = lambda x: labels.index(x) if x in labels else -1  # noqa: E731
    want_f1 = f1_score([idx(g) for g in golds2], [idx(p) for p in answers["LaMP-2"]],
                       labels=list(range(len(labels))), average="macro", zero_division=0)
    assert table.iloc[0]["LaMP-2 F1"] == pytest.approx(want_f1)
    golds3 = [float(i.gold["output"]) for i in data.instances if i.group == "LaMP-3"]
    assert table.iloc[0]["LaMP-3 MAE"] == pytest.approx(mean_absolute_error(golds3, [5, 2, 3]))
    assert table.iloc[0]["LaMP-3 RMSE"] == pytest.approx(math.sqrt(mean_squared_error(golds3, [5, 2, 3])))
    refs = [i.gold["output"] for i in data.instances if i.group == "LaMP-4"]
    scorer = rouge_scorer.RougeScorer(["rouge1"])
    want_r1 = sum(scorer.score(r, p)["rouge1"].fmeasure for r, p in zip(refs, answers["LaMP-4"])) / 3
    assert table.iloc[0]["LaMP-4 ROUGE-1"] == pytest.approx(want_r1)
    assert set(long["metric"]) >= {"score", "valid"} and long["n_users"].max() == 3


