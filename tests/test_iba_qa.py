"""QA probe twins of IBA-Bench instances (the knowledge-to-action gap, paper 5.3)."""
from __future__ import annotations

from dataclasses import asdict

import pytest

from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.iba.qa import make_qa_probes
from perseval.core.instances import Instance


@pytest.fixture(scope="module")
def built():
    return IbaBenchmark({"noise_per_evidence": 1}).build(sample=6, seed=11, source=None).instances


def by_type(instances, action_type):
    return next(i for i in instances if i.payload["action_type"] == action_type)


def test_one_twin_per_task_instance(built):
    twins = make_qa_probes(built)
    assert [t.instance_id for t in twins] == [i.instance_id + "-qa" for i in built]
    for task, twin in zip(built, twins):
        assert (twin.user_id, twin.group, twin.benchmark) == (task.user_id, task.group, task.benchmark)
        assert twin.payload["action_type"] == "qa" and twin.payload["base_instance"] == task.instance_id
        for key in ("scenario", "n_evidence", "n_constraints"):
            assert twin.payload[key] == task.payload[key]
        assert "api" not in twin.payload  # a question, not an API call
        assert twin.gold["preferences"] == task.gold["preferences"]
        assert twin.gold["n_dynamic"] == task.gold["n_dynamic"]
    assert make_qa_probes(twins) == []  # twins are not probed again


def test_twins_are_deterministic(built):
    assert [asdict(t) for t in make_qa_probes(built)] == [asdict(t) for t in make_qa_probes(built)]


def test_query_names_every_constrained_dimension_but_no_value(built):
    task = by_type(built, "generate")
    twin = make_qa_probes([task])[0]
    assert task.query in twin.query
    scenario = load_taxonomy().scenario(task.payload["scenario"])
    for pref in task.gold["preferences"]:
        assert f"- {scenario.dimension(pref['dimension']).name}\n" in twin.query
    assert twin.query.count("\n- ") == len(task.gold["preferences"])
    for pref in task.gold["preferences"]:
        assert f"'{pref['value']}'" not in twin.query


def test_generate_twin_keeps_the_original_checkpoints(built):
    task = by_type(built, "generate")
    twin = make_qa_probes([task])[0]
    original, qa = task.gold["checkpoints"], twin.gold["checkpoints"]
    assert [(c["id"], c["dimension"], c["value"]) for c in qa] == [(c["id"], c["dimension"], c["value"])
                                                                 for c in original]
    assert [c["task_statement"] for c in qa] == [c["statement"] for c in original]
    assert all(c["statement"].startswith("The answer says") for c in qa)


def test_call_api_twin_gets_one_checkpoint_per_slot(built):
    task = by_type(built, "call_api")
    twin = make_qa_probes([task])[0]
    cps = twin.gold["checkpoints"]
    assert [c["id"] for c in cps] == list(task.gold["slots"])
    for cp in cps:
        value = task.gold["slots"][cp["id"]]
        assert cp["value"] == value
        assert f"prefers '{value}' for {cp['id']}" in cp["statement"]


def test_food_ordering_slot_statement_by_hand():
    task = Instance("iba-9999-food-ordering", "iba", "u9", "Daily Consumption", "Order a pad thai.",
                    {"scenario": "Food ordering", "action_type": "call_api", "n_evidence": 3, "n_constraints": 2,
                     "api": {"name": "order_food"}},
                    {"slots": {"spice_level": "hot", "cutlery": "none"},
                     "preferences": [{"dimension": "spice_level", "value": "hot", "previous": "mild", "dynamic": True},
                                     {"dimension": "cutlery", "value": "none", "previous": None, "dynamic": False}],
                     "n_dynamic": 1})
    twin = make_qa_probes([task])[0]
    assert twin.instance_id == "iba-9999-food-ordering-qa"
    assert "- Spice tolerance\n- Disposable cutlery" in twin.query
    assert [c["statement"] for c in twin.gold["checkpoints"]] == [
        "The answer says that the user now prefers 'hot' for spice_level (Spice tolerance: wants dishes very spicy).",
        "The answer says that the user prefers 'none' for cutlery (Disposable cutlery: declines disposable cutlery).",
    ]


def test_unknown_scenario_falls_back_to_ids():
    task = Instance("x-1", "iba", "u", "Work", "Plan my week.",
                    {"scenario": "Not in the taxonomy", "action_type": "call_api", "dynamic": True},
                    {"slots": {"meeting_length": "short"}})
    twin = make_qa_probes([task])[0]
    assert "- Meeting length" in twin.query
    assert twin.payload["dynamic"] is True
    assert twin.gold["checkpoints"] == [{"id": "meeting_length", "dimension": "meeting_length", "value": "short",
                                         "statement": "The answer says that the user prefers 'short' for "
                                                      "meeting_length (Meeting length)."}]
