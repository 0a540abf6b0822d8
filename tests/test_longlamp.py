"""LongLaMP from the hand-written sample in the official layout (perseval/benchmarks/longlamp/sample): the loader
(one row a line and JSON lists) and its row errors, the paper's prompts, the answer extraction, the rule judge's
ROUGE against the rouge-score package on long texts, the paper's table and the control's pairing."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from rouge_score import rouge_scorer

from perseval.benchmarks.base import build_all
from perseval.benchmarks.longlamp.analysis import paper_table
from perseval.benchmarks.longlamp.answers import extract
from perseval.benchmarks.longlamp.layout import TASKS
from perseval.benchmarks.profile_questions import intervals
from perseval.core.instances import AgentOutput, Passage
from perseval.judges.base import JudgeBinding
from perseval.kernel.registry import benchmark_class, judge_class
from perseval.pipeline.controls import derangement
from tests.conftest import REPO

DATA = REPO / "perseval" / "benchmarks" / "longlamp" / "sample"
LongLamp = benchmark_class("longlamp")


def build(**params):
    bench = LongLamp(LongLamp.Params(**params))
    return bench, build_all(bench, sample=10, seed=1, source=DATA)


# --- the loader -----------------------------------------------------------------------------------------

def test_the_sample_loads_every_task_in_both_settings_as_users_with_their_profiles():
    bench, data = build()  # the user setting: one row a line
    LongLamp.check_instances(data.instances, "sample")
    assert {i.group for i in data.instances} == set(TASKS)
    assert len(data.instances) == 9 == len({i.user_id for i in data.instances})
    assert {d.owner for d in data.documents} == {i.user_id for i in data.instances} and len(data.documents) == 27
    review = next(i for i in data.instances if i.group == "product_review")
    assert review.payload["author"] == "A2K7QZ1M0P3R" and review.query == review.payload["input"]
    item = next(d for d in data.documents if d.owner == review.user_id)
    assert item.text.startswith('5.0 is the rating given to a product described as "Electric gooseneck kettle')
    paper = next(d for d in data.documents if d.owner.startswith("abstract_generation"))
    assert paper.timestamp == "2019" and paper.text.startswith('"Long-range radio links for orchard microclimate')
    table = bench.stats(data.instances, data.documents)["rows_by_task"]
    posts = [len(i.gold["output"].split()) for i in data.instances if i.group == "topic_writing"]
    assert table.loc["topic_writing", "questions"] == 3 and table.loc["topic_writing", "output_words"] == \
        pytest.approx(sum(posts) / 3) and table.loc["product_review", "paper"] == "Review Writing"
    _, temporal = build(setting="temporal")  # a JSON list
    assert len(temporal.instances) == 6 and temporal.instances[0].instance_id == \
        "longlamp-abstract_generation-temporal-val-1"


def test_a_jsonl_file_is_read_where_no_json_file_is(tmp_path):
    root = tmp_path / "longlamp"
    shutil.copytree(DATA, root)
    folder = root / "topic_writing_user"
    (folder / "val.json").rename(folder / "val.jsonl")
    data = build_all(LongLamp(LongLamp.Params(tasks=["topic_writing"])), sample=10, seed=1, source=root)
    assert len(data.instances) == 3


def broken(tmp_path: Path, task: str, setting: str, edit) -> list[str]:
    root = tmp_path / "longlamp"
    shutil.copytree(DATA, root)
    edit(root / f"{task}_{setting}" / "val.json")
    return LongLamp.validate_source(root, LongLamp.Params(tasks=[task], setting=setting))


def _lines(change):
    def edit(path: Path) -> None:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        change(rows)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return edit


def _listed(change):
    def edit(path: Path) -> None:
        rows = json.loads(path.read_text())
        change(rows)
        path.write_text(json.dumps(rows))
    return edit


@pytest.mark.parametrize("task, setting, edit, needle", [
    ("product_review", "user", _lines(lambda v: v[1]["profile"][1].pop("reviewText")),
     "row 2, field 'profile[1].reviewText'"),
    ("product_review", "user", _lines(lambda v: v[0]["profile"][0].update(overall=True)),
     "row 1, field 'profile[0].overall'"),
    ("abstract_generation", "user", _lines(lambda v: v[2].pop("name")), "row 3, field 'name'"),
    ("topic_writing", "user", _lines(lambda v: v[0].update(output="  ")), "row 1, field 'output'"),
    ("topic_writing", "temporal", _listed(lambda v: v[1].update(profile="none")), "row 2, field 'profile'"),
    ("abstract_generation", "temporal", _listed(lambda v: v[0]["profile"][2].update(title="")),
     "row 1, field 'profile[2].title'"),
    ("product_review", "temporal", _listed(lambda v: v[0].update(input=None)), "row 1, field 'input'"),
])
def test_a_bad_row_is_named_by_file_row_and_field(tmp_path, task, setting, edit, needle):
    problems = broken(tmp_path, task, setting, edit)
    assert len(problems) == 1 and f"{task}_{setting}/val.json" in problems[0] and needle in problems[0], problems


def test_a_line_that_is_not_json_and_a_missing_file_are_named(tmp_path):
    def cut(path: Path) -> None:
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], lines[1][:40], lines[2]]) + "\n")
    problems = broken(tmp_path, "abstract_generation", "user", cut)
    assert len(problems) == 1 and "row 2" in problems[0] and "not a JSON row" in problems[0], problems
    problems = broken(tmp_path / "b", "topic_writing", "user", lambda path: path.unlink())
    assert len(problems) == 1 and "topic_writing_user/val.json" in problems[0] and "missing" in problems[0]
    assert "docs/benchmarks/longlamp.md" in problems[0]


# --- prompts and answers --------------------------------------------------------------------------------

def test_the_prompt_shows_each_profile_item_once_and_an_empty_answer_is_invalid():
    _, data = build(tasks=["abstract_generation"])
    inst = data.instances[0]
    docs = [d for d in data.documents if d.owner == inst.user_id][:2]
    prompt = LongLamp.request_format.prompt(inst, [Passage(d.doc_id, 0, d.text, 1.0) for d in docs] * 2, 10_000)
    text = prompt.messages[0]["content"]
    assert prompt.json_schema is None and text.count(docs[0].text) == 1 and text.endswith(inst.payload["input"])
    assert f"{docs[0].text}, and {docs[1].text}. These abstracts are this author's" in text
    cut = LongLamp.request_format.prompt(inst, [Passage(docs[0].doc_id, 0, docs[0].text, 1.0)], 60)
    assert cut.messages[0]["content"].startswith(docs[0].text[:60] + ". ")  # the title survives the cut
    assert extract(inst, "  ").problem and extract(inst, " An abstract. ").parsed == {"answer": "An abstract."}


# --- the rule judge against rouge-score, the paper's table, the control ----------------------------------

def judged(data, answers: dict[str, str | None]) -> tuple[list[dict], dict[str, dict[str, float]]]:
    judge = judge_class("longlamp.rule")(judge_class("longlamp.rule").Params())
    rows, by_instance = [], {}
    for inst in data.instances:
        answer = answers[inst.instance_id]
        out = AgentOutput(inst.instance_id, "x", 0, answer or "", parsed={"answer": answer} if answer else None,
                          status="ok" if answer else "invalid", error="" if answer else "an empty answer")
        scores = judge.score(inst, out, asyncio.run(judge.judge(inst, out, JudgeBinding("longlamp.rule"))))
        by_instance[inst.instance_id] = {s.metric: s.value for s in scores}
        rows += [{"agent": "x", "backbone": "m", "retriever": "-", "judge": "longlamp.rule",
                  "instance_id": s.instance_id, "group": inst.group, "metric": s.metric, "value": s.value,
                  "user_id": inst.user_id} for s in scores]
    return rows, by_instance


def test_the_rule_judges_rouge_on_long_texts_equals_the_rouge_score_package():
    _, data = build()
    # each row answered with another row's gold of the same task (long texts that share some words), one with none
    golds = {i.instance_id: i.gold["output"] for i in data.instances}
    ids = list(golds)
    answers: dict[str, str | None] = {iid: golds[ids[(k + 1) % len(ids)]] for k, iid in enumerate(ids)}
    answers[ids[4]] = None
    rows, scores = judged(data, answers)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False)
    for iid, answer in answers.items():
        if answer is None:
            assert scores[iid] == {"score": 0.0, "rouge1": 0.0, "rougeL": 0.0, "valid": 0.0}
            continue
        want = scorer.score(golds[iid], answer)
        assert scores[iid]["rouge1"] == pytest.approx(100 * want["rouge1"].fmeasure, abs=1e-9)
        assert scores[iid]["rougeL"] == pytest.approx(100 * want["rougeL"].fmeasure, abs=1e-9)
        assert scores[iid]["score"] == scores[iid]["rouge1"] and scores[iid]["valid"] == 100.0
    assert 0 < scores[ids[0]]["rougeL"] < scores[ids[0]]["rouge1"] < 60  # long, different texts: partial overlap
    table = paper_table(intervals(pd.DataFrame(rows)))
    assert list(table.columns) == ["Abstract Generation ROUGE-1", "Abstract Generation ROUGE-L",
                                   "Review Writing ROUGE-1", "Review Writing ROUGE-L", "Topic Writing ROUGE-1",
                                   "Topic Writing ROUGE-L"]
    mine = [i for i in data.instances if i.group == "product_review"]
    want_rl = sum(scorer.score(golds[i.instance_id], answers[i.instance_id] or "")["rougeL"].fmeasure
                  if answers[i.instance_id] else 0.0 for i in mine) / len(mine)
    assert table.iloc[0]["Review Writing ROUGE-L"] == pytest.approx(want_rl)


def test_the_oracle_scores_100_and_the_swapped_history_control_pairs_users_of_the_same_task():
    _, data = build()
    _, scores = judged(data, {i.instance_id: i.gold["output"] for i in data.instances})
    assert all(s["rouge1"] == s["rougeL"] == 100.0 for s in scores.values())
    swap = derangement(data.instances, seed=3)
    task = {i.user_id: i.group for i in data.instances}
    assert len(swap) == 9 and all(task[u] == task[v] and u != v for u, v in swap.items())
