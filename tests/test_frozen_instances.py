"""An instance is read-only once built (issue 41): a write to its payload or gold raises where it happens."""
from __future__ import annotations

import copy
import json
import pickle

import pytest

from perseval.core.frozen import FrozenError, thaw
from perseval.core.instances import Instance
from perseval.core.schema import from_table, to_table

from .conftest import build


def _inst() -> Instance:
    return Instance("i1", "iba", "u1", "g", "q", {"history": [{"turn": 1}]}, {"checkpoints": ["a", "b"],
                                                                          "slots": {"cuisine": "thai"}})


@pytest.mark.parametrize("write", [
    lambda i: i.gold.__setitem__("oracle", []),
    lambda i: i.gold["checkpoints"].append("c"),
    lambda i: i.gold["slots"].update(cuisine="x"),
    lambda i: i.payload["history"][0].__setitem__("turn", 2),
    lambda i: i.payload.pop("history"),
    lambda i: setattr(i, "query", "other"),
])
def test_every_kind_of_write_raises(write):
    inst = _inst()
    with pytest.raises((FrozenError, AttributeError)):
        write(inst)
    assert inst.gold["checkpoints"] == ["a", "b"] and inst.payload["history"][0]["turn"] == 1


def test_reading_stays_as_it_was():
    """Readers see plain dicts and lists: JSON, pickling (Dask), Arrow round trip, copies that may change."""
    inst = _inst()
    assert isinstance(inst.gold, dict) and isinstance(inst.gold["checkpoints"], list)
    assert json.loads(json.dumps(inst.gold)) == {"checkpoints": ["a", "b"], "slots": {"cuisine": "thai"}}
    assert pickle.loads(pickle.dumps(inst)) == inst
    [back] = from_table(to_table([inst], Instance), Instance)
    assert back == inst
    with pytest.raises(FrozenError):
        back.gold["x"] = 1
    mine = copy.deepcopy(inst.gold)
    mine["checkpoints"].append("c")
    assert thaw(inst.payload) == {"history": [{"turn": 1}]} and inst.gold["checkpoints"] == ["a", "b"]
    labelled = inst.with_gold(oracle=["d1"])
    assert labelled.gold["oracle"] == ["d1"] and "oracle" not in inst.gold


def test_a_constructed_benchmark_s_instances_are_read_only():
    data = build(sample=4)
    assert data.instances
    with pytest.raises(FrozenError):
        data.instances[0].gold["checkpoints"] = []
