"""Instance validation (appendix B.1): raw agreement, Gwet's AC1, annotation files, LLM-judge labels."""
from __future__ import annotations

import asyncio
import json

import pytest

from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.iba.validation import (DIMENSIONS, LabelSet, agreement_report, gwet_ac1, raw_agreement,
                                                read_label_csv, sample_for_validation, write_label_csv)
from perseval.benchmarks.iba.judges.validation import CRITERIA, label_instances
from perseval.core.errors import InputError
from tests.scripted import ScriptedChat

# Ten items, rater A says 1 eight times, rater B eight times; they differ on items 8 and 9.
A = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
B = [1, 1, 1, 1, 1, 1, 1, 0, 1, 0]


def test_ac1_matches_a_hand_computed_example():
    # Pa = 8/10; pi_1 = (8 + 8) / 20 = 0.8; Pe = 0.8 * 0.2 + 0.2 * 0.8 = 0.32
    # AC1 = (0.8 - 0.32) / (1 - 0.32) = 0.48 / 0.68 = 0.70588...
    assert raw_agreement(A, B) == pytest.approx(0.8)
    assert gwet_ac1(A, B) == pytest.approx(0.48 / 0.68)
    # Cohen's kappa on the same labels is 0.375 (pe = 0.68): AC1 does not collapse under skew
    assert gwet_ac1(A, B) > 0.375


def test_ac1_edge_cases():
    assert gwet_ac1([1, 1, 1], [1, 1, 1]) == 1.0  # one label only: no chance agreement, full agreement
    assert gwet_ac1([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert gwet_ac1([1, 0], [0, 1]) == pytest.approx(-1.0)  # Pa = 0, Pe = 0.5
    with pytest.raises(ValueError):
        raw_agreement([], [])


def labels(name, rows):
    return LabelSet(name, {iid: dict(zip(DIMENSIONS, vals)) for iid, vals in rows.items()})


def test_report_per_dimension_overall_and_exclusions():
    a = labels("a", {f"i{k}": (x, x, 1) for k, x in enumerate(A)})
    b = labels("b", {f"i{k}": (y, 1, 1) for k, y in enumerate(B)})
    b.labels["i0"]["coherence"] = None  # an unusable label is left out, not read as 0
    a.labels["extra"] = {d: 1 for d in DIMENSIONS}  # an item only one rater labelled
    rep = agreement_report(a, b)
    r = rep["dimensions"]["reasonableness"]
    assert (r["n"], r["excluded"]) == (10, 1) and r["agreement"] == pytest.approx(0.8)
    assert r["ac1"] == pytest.approx(0.48 / 0.68)
    c = rep["dimensions"]["coherence"]
    assert (c["n"], c["excluded"]) == (9, 2) and c["agreement"] == pytest.approx(7 / 9)
    p = rep["dimensions"]["persona_consistency"]
    assert p["agreement"] == 1.0 and p["ac1"] == 1.0
    o = rep["overall"]
    assert o["n"] == 29 and o["excluded"] == 4 and o["agreement"] == pytest.approx((8 + 7 + 10) / 29)
    assert rep["mean_ac1"] == pytest.approx((r["ac1"] + c["ac1"] + 1.0) / 3)


def test_annotation_csv_round_trip_and_errors(tmp_path):
    f = tmp_path / "ann1.csv"
    f.write_text("Instance ID,Reasonableness,Coherence,Persona Consistency\n"
                 "x1,1,yes,0\nx2,no,, TRUE \n")
    got = read_label_csv(f)
    assert got.name == "ann1"
    assert got.labels == {"x1": {"reasonableness": 1, "coherence": 1, "persona_consistency": 0},
                          "x2": {"reasonableness": 0, "coherence": None, "persona_consistency": 1}}
    assert read_label_csv(write_label_csv(got, tmp_path / "out.csv")).labels == got.labels

    bad = tmp_path / "bad.csv"
    bad.write_text("instance_id,reasonableness,coherence\nx1,1,1\n")
    with pytest.raises(InputError, match="missing column 'persona_consistency'"):
        read_label_csv(bad)
    bad.write_text("instance_id,reasonableness,coherence,persona_consistency\nx1,1,1,1\nx2,1,maybe,1\n")
    with pytest.raises(InputError, match=r"row 3, field 'coherence': label 'maybe'"):
        read_label_csv(bad)
    bad.write_text("instance_id,reasonableness,coherence,persona_consistency\nx1,1,1,1\nx1,0,1,1\n")
    with pytest.raises(InputError, match="row 3.*labelled twice"):
        read_label_csv(bad)
    with pytest.raises(InputError, match="nope.csv: missing: no annotation file"):
        read_label_csv(tmp_path / "nope.csv")


def sample():
    data = IbaBenchmark({"noise_per_evidence": 6, "dynamic_rate": 0.8}).build(sample=8, seed=2, source=None)
    owners: dict = {}
    for d in data.documents:
        owners.setdefault(d.owner, []).append(d)
    return sample_for_validation(data.instances, n=4, seed=1), owners, data


def test_sample_for_validation_is_seeded():
    picked, _, data = sample()
    assert len(picked) == 4 and picked == sample_for_validation(data.instances, n=4, seed=1)
    assert [i.instance_id for i in picked] == sorted(i.instance_id for i in picked)
    assert len(sample_for_validation(data.instances, n=500)) == len(data.instances)


def test_llm_judge_labels_one_per_instance_and_dimension():
    picked, owners, _ = sample()
    judge = ScriptedChat('{"label": 1, "reason": "fine"}', name="j")
    got = asyncio.run(label_instances(judge, picked, owners, repeat=1))
    assert got.name == "j#1" and len(judge.calls) == 4 * 3
    assert got.labels == {i.instance_id: {d: 1 for d in DIMENSIONS} for i in picked}
    assert (got.unparsed, got.failed) == (0, 0)
    assert all(c["repeat"] == 1 and c["json_schema"]["required"] == ["label", "reason"] for c in judge.calls)
    prompt = judge.calls[0]["messages"][-1]["content"]
    inst = picked[0]
    assert inst.query in prompt and inst.gold["persona"]["background"] in prompt
    evidence = [d for d in owners[inst.user_id] if d.meta.get("supports")]
    assert all(d.text in prompt for d in evidence)  # every evidence turn is shown
    assert sum(CRITERIA[d] in c["messages"][-1]["content"] for c in judge.calls for d in DIMENSIONS) == 12


def test_unparseable_and_failed_judge_answers_are_excluded_and_counted():
    picked, owners, _ = sample()
    answers = iter(['{"label": 0, "reason": "x"}', "I am not sure", None] * 4)
    judge = ScriptedChat(lambda m: next(answers))
    got = asyncio.run(label_instances(judge, picked, owners))
    flat = [v for per in got.labels.values() for v in per.values()]
    assert flat.count(0) == 4 and flat.count(None) == 8 and 1 not in flat
    assert (got.unparsed, got.failed) == (4, 4)
    assert {r["status"] for r in got.details} == {"scored", "unparsed", "failed"}
    assert any(r["raw"] == "I am not sure" for r in got.details)
    other = LabelSet("b", {iid: {d: 0 for d in DIMENSIONS} for iid in got.labels})
    rep = agreement_report(got, other)
    assert rep["overall"]["n"] == 4 and rep["overall"]["excluded"] == 8 and rep["unparsed"]["scripted#0"] == 4
    json.dumps(rep)  # a report is plain data, ready to log


def test_label_sample_writes_what_raters_and_perseval_agreement_read(tmp_path):
    """`perseval iba label-sample`'s files: the seeded sample as an empty label file with the views raters read,
    and a model's labels per repeat, each readable by `perseval iba agreement` (read_label_csv)."""
    from perseval.benchmarks.iba.label_sample import pick, write_for_raters, write_judge_labels

    _, _, data = sample()
    picked = pick(data.instances, data.documents, n=4, seed=1)
    assert picked.instances == sample_for_validation(data.instances, n=4, seed=1)
    template, views = write_for_raters(picked, tmp_path, "iba")
    empty = read_label_csv(template)
    assert empty.labels == {i.instance_id: {d: None for d in DIMENSIONS} for i in picked.instances}
    text = views.read_text()
    assert all(f"## {i.instance_id}" in text and i.query in text for i in picked.instances)
    answers = iter(['{"label": 1, "reason": "x"}', '{"label": 0, "reason": "y"}'] * 12)
    judge = ScriptedChat(lambda m: next(answers), name="j")
    first, second = asyncio.run(write_judge_labels(judge, picked, tmp_path, "iba", repeats=2))
    assert (first.name, second.name) == ("iba_j_0.csv", "iba_j_1.csv") and len(judge.calls) == 2 * 4 * 3
    a, b = read_label_csv(first), read_label_csv(second)
    assert set(a.labels) == set(empty.labels)
    assert sorted({c["repeat"] for c in judge.calls}) == [0, 1]
    assert agreement_report(a, b)["overall"]["n"] == 12
