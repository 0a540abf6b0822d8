"""Typed instance views: every shipped benchmark's built instances fit its Payload and Gold views, a misfit
is an InputError naming the source, the instance and the key, and no module outside perseval/benchmarks/
reads an instance's payload or gold by string key."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from perseval.benchmarks.apeb.views import ApebGold, ApebPayload
from perseval.benchmarks.base import build_all
from perseval.benchmarks.views import ScenarioPayload
from perseval.core.errors import InputError
from perseval.core.instances import Instance
from perseval.kernel.registry import benchmark_class

from .conftest import REPO


@pytest.mark.parametrize("name,sample", [("iba", 3), ("apeb", 2)])
def test_constructed_instances_fit_their_benchmarks_views(name, sample):
    cls = benchmark_class(name)
    bench = cls(cls.Params())
    data = build_all(bench, sample=sample, seed=3, source=None)
    assert data.instances
    cls.check_instances(data.instances, "the build")  # raises on a misfit
    if name == "apeb":
        view = ApebPayload.of(data.instances[0])
        assert view.query_level in ("intent", "refined") and ApebGold.of(data.instances[0]).purchased in view.ids
    else:
        assert all(ScenarioPayload.of(i).scenario for i in data.instances)
        assert any(cls.known_items(i) for i in data.instances) or any(i.gold.get("slots") for i in data.instances)


def test_a_misfit_names_the_source_the_instance_and_the_key():
    cls = benchmark_class("apeb")
    bad = Instance("apeb-u1-intent-hard", "apeb", "u1", "shoes", "q",
                   {"query_level": "vague", "candidate_set": "hard", "candidates": [{"id": "p1"}]},
                   {"purchased": "p1", "session": {}})
    with pytest.raises(InputError) as err:
        cls.check_instances([bad], "logs/events.csv")
    msg = str(err.value)
    assert msg.startswith("logs/events.csv, field 'payload.query_level'") and "apeb-u1-intent-hard" in msg
    assert "'intent'" in msg and "'refined'" in msg  # the allowed values
    with pytest.raises(InputError, match="field 'gold.purchased'"):
        cls.check_instances([Instance("a", "apeb", "u", "g", "q", {**bad.payload, "query_level": "intent"},
                                      {"session": {}})], "x")


@pytest.mark.parametrize("name", ["prefeval", "persona_mem"])
def test_the_hand_written_samples_fit_their_benchmarks_views(name):
    """PrefEval and PersonaMem read a release (`source:`): tests/data/<name> is the hand-written one."""
    cls = benchmark_class(name)
    params = cls.Params(inter_turns=[0, 2]) if name == "prefeval" else cls.Params()  # the sample has 4 turns
    data = build_all(cls(params), sample=100, seed=3, source=REPO / "tests" / "data" / name)
    assert data.instances
    cls.check_instances(data.instances, "the build")  # raises on a misfit
    for i in data.instances:
        assert i.group and cls.Payload.of(i) and cls.Gold.of(i)
    if name == "prefeval":  # both tasks, so the classification-only options and answer are checked too
        assert {cls.Payload.of(i).task for i in data.instances} == {"generation", "classification"}
        assert all(cls.Gold.of(i).answer for i in data.instances if cls.Payload.of(i).options)


@pytest.mark.parametrize("name,payload,gold,key", [
    ("prefeval", {"form": "explicit", "topic": "travel", "pref_doc": "d", "task": "generation"},
     {"preference": "p", "explanation": "e"}, "payload.inter_turns"),
    ("prefeval", {"form": "explicit", "topic": "travel", "pref_doc": "d", "task": "generation", "inter_turns": 1},
     {"explanation": "e"}, "gold.preference"),
    ("prefeval", {"form": "explicit", "pref_doc": "d", "task": "classification", "inter_turns": 1, "options": "abcd"},
     {"preference": "p"}, "payload.options"),
    ("persona_mem", {"options": ["a", "b", "c", "d"], "topic": "t", "shared_context_id": "s", "end_index": "late",
                     "distance_blocks": 1, "distance_tokens": 2}, {"answer": "a"}, "payload.end_index"),
    ("persona_mem", {"options": ["a", "b", "c", "d"], "topic": "t", "shared_context_id": "s", "end_index": 3,
                     "distance_blocks": 1, "distance_tokens": 2}, {}, "gold.answer"),
])
def test_a_prefeval_or_persona_mem_misfit_names_the_file_the_instance_and_the_key(name, payload, gold, key):
    cls = benchmark_class(name)
    with pytest.raises(InputError) as err:
        cls.check_instances([Instance("bad-1", name, "u", "g", "q", payload, gold)], "release/rows.json")
    msg = str(err.value)
    assert msg.startswith(f"release/rows.json, field '{key}'") and "bad-1" in msg


def _string_reads(path: Path) -> list[str]:
    """`<x>.payload[...]`, `<x>.gold[...]`, `<x>.payload.get(...)`, `<x>.gold.get(...)` in one file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = None
        if isinstance(node, ast.Subscript):
            target = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            target = node.func.value
        if isinstance(target, ast.Attribute) and target.attr in ("payload", "gold"):
            out.append(f"{path}:{node.lineno}")
    return out


def test_no_string_read_of_payload_or_gold_outside_the_benchmarks():
    files = [p for d in ("perseval", "tasks", "flows") for p in sorted((REPO / d).rglob("*.py"))
             if not p.is_relative_to(REPO / "perseval" / "benchmarks")]
    assert len(files) > 40
    assert [r for f in files for r in _string_reads(f)] == []


def test_the_read_finder_finds_reads(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g(inst):\n    return inst.payload['a'], inst.gold.get('b'), payload['c']\n")
    assert len(_string_reads(f)) == 2
