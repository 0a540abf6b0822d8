"""Shards sized to the deployment (perseval.pipeline.units.Sharding), a shard's instances read alone, and outputs
written in shards of another size cleared before they could be read as this run's (freshness.reshard)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from perseval.core.instances import AgentOutput, Instance
from perseval.core.store import StageStore
from perseval.pipeline.freshness import SHARDS_FILE, reshard
from perseval.pipeline.stages import load_instances, shard_instances, shard_of
from perseval.pipeline.units import MIN_SHARD, SHARDS_PER_SLOT, Sharding, shards


def test_an_explicit_shard_size_wins():
    assert Sharding(5, concurrency=64, slots=2).size(20_000) == 5
    assert shards(12, Sharding(5)) == [0, 1, 2] == shards(12, 5)


@pytest.mark.parametrize("n,concurrency,slots", [(3, 4, 2), (200, 64, 2), (2_000, 64, 2), (20_000, 64, 2),
                                                 (100_000, 256, 8), (50, 1, 1)])
def test_an_automatic_shard_keeps_a_client_busy_and_a_stage_a_few_tasks_per_slot(n, concurrency, slots):
    size = Sharding(None, concurrency, slots).size(n)
    assert size >= max(concurrency, MIN_SHARD)  # a shard's client can keep max_concurrency requests in flight
    n_shards = len(shards(n, size))
    assert n_shards <= slots * SHARDS_PER_SLOT  # the per-task cost stays a few tasks' worth per slot
    if n >= slots * SHARDS_PER_SLOT * max(concurrency, MIN_SHARD):  # enough data to spread: every slot works
        assert n_shards >= slots * (SHARDS_PER_SLOT - 1)


def _instances(n: int) -> list[Instance]:
    return [Instance(f"i{k:05d}", "b", f"u{k % 7}", "g", f"query {k}") for k in range(n)]


@pytest.mark.parametrize("size", [1, 3, 7, 8, 25, 64])
def test_a_shard_read_alone_is_the_slice_of_all_instances(tmp_path, size):
    store, items = StageStore(tmp_path, "data", "k"), _instances(57)
    cuts = [0, 5, 6, 30, 57]  # parts of uneven sizes, as a benchmark's batches write them
    for part, (a, b) in enumerate(zip(cuts, cuts[1:])):
        store.write_records(part, items[a:b], Instance)
    everything = load_instances(str(tmp_path), "k")
    for shard in shards(len(items), size):
        assert shard_instances(str(tmp_path), "k", shard, size) == shard_of(everything, shard, size)
    assert shard_instances(str(tmp_path), "k", len(items) // size + 1, size) == []


def _plan() -> SimpleNamespace:
    run = SimpleNamespace(key="r1", data=SimpleNamespace(key="d1"))
    judged = SimpleNamespace(key="j1", run=run)
    return SimpleNamespace(runs=lambda: [run], judgings=lambda: [judged])


def _write_parts(root, stage: str, key: str, n_parts: int) -> StageStore:
    store = StageStore(root, stage, key)
    for p in range(n_parts):
        store.write_records(p, [AgentOutput(f"i{p}", "a", 0, "x")], AgentOutput)
    return store


def test_outputs_of_another_shard_size_are_cleared_and_each_records_its_size(tmp_path):
    root = str(tmp_path)
    run, judge = _write_parts(root, "run", "r1", 25), _write_parts(root, "judge", "j1", 25)
    # written before sizes were recorded, in shards of 8 (the legacy size): a run in shards of 64 clears both
    assert reshard(root, _plan(), {"d1": 64}, legacy=8) == ["run/r1", "judge/j1"]
    assert run.parts() == [] and judge.parts() == []
    assert (run.dir / SHARDS_FILE).read_text() == '{"shard_size": 64}'
    _write_parts(root, "run", "r1", 4)
    assert reshard(root, _plan(), {"d1": 64}, legacy=8) == [] and len(run.parts()) == 4  # same size: kept
    assert reshard(root, _plan(), {"d1": 32}, legacy=64) == ["run/r1", "judge/j1"] and run.parts() == []


def test_legacy_outputs_of_the_same_size_are_kept(tmp_path):
    root = str(tmp_path)
    run = _write_parts(root, "run", "r1", 3)
    assert reshard(root, _plan(), {"d1": 4}, legacy=4) == [] and len(run.parts()) == 3
    assert (run.dir / SHARDS_FILE).is_file()
