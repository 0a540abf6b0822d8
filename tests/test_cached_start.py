"""A run reads and checks a release's files before any server starts, unless the output root already holds
the data built from them (the data key names every file's size and time): a cached re-run of 20,000 LaMP
questions spent most of its start reading them again. `perseval validate` always reads them."""
from __future__ import annotations

import pytest

from perseval.benchmarks.base import Benchmark
from perseval.core.store import StageStore
from perseval_flows.cli import _load_or_exit
from scripts.bench_scale import write_configs, write_release


@pytest.fixture
def reads(monkeypatch):
    seen: list[str] = []
    original = Benchmark.validate_source.__func__

    def counting(cls, source, params):
        seen.append(str(source))
        return original(cls, source, params)

    monkeypatch.setattr(Benchmark, "validate_source", classmethod(counting))
    return seen


def test_a_run_skips_reading_a_source_whose_data_is_built(tmp_path, monkeypatch, reads):
    write_release(tmp_path / "release", 3, profile_items=2)
    config = write_configs(tmp_path, 3, "http://127.0.0.1:9/v1", 4, None, retrievers=(), controls=(),
                           agents=("lamp-oracle",))
    monkeypatch.chdir(tmp_path)
    _, plan = _load_or_exit(config, output_root=str(tmp_path / "runs"), skip_built=True)
    assert reads == [str(tmp_path / "release")]  # nothing built: read and checked
    for stage in ("data", "documents"):  # the construct stage's two outputs of this data key, complete
        store = StageStore(tmp_path / "runs", stage, plan.data[0].key)
        store.dir.mkdir(parents=True)
        store.mark_complete({})
    _load_or_exit(config, output_root=str(tmp_path / "runs"), skip_built=True)
    assert len(reads) == 1  # built: not read again
    _load_or_exit(config, output_root=str(tmp_path / "runs"))  # perseval validate's call: always read
    _load_or_exit(config, output_root=str(tmp_path / "elsewhere"), skip_built=True)  # another output root holds nothing
    assert len(reads) == 3
