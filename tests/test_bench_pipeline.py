"""The P4 extrapolation of scripts/bench_pipeline.py: a line through the measured sizes."""
from __future__ import annotations

import importlib.util

import pytest

from .conftest import REPO


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline", REPO / "scripts" / "bench_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def size(n: int, wall: float, rss: float) -> dict:
    return {"instances": n, "wall_s": wall, "construct_s": wall / 10, "index_s": wall * 0.9,
            "peak_rss_mib": rss, "rss_before_mib": 500}


def test_two_sizes_fit_a_line_that_need_not_pass_through_the_origin(bench):
    # 300 MiB of fixed cost beyond the pre-build RSS, 0.5 MiB per instance; 2 s per instance
    full = bench.extrapolate([size(100, 200.0, 850.0), size(200, 400.0, 900.0)], full=1000)
    assert full["wall_s"] == 2000.0 and full["index_s"] == 1800.0
    assert full["peak_rss_mib"] == 1300.0
    assert full["peak_rss_mib_per_instance"] == [3.5, 0.5]  # origin -> first size, then between the sizes
    assert full["extrapolated"] is True


def test_one_size_scales_from_the_origin(bench):
    full = bench.extrapolate([size(100, 30.0, 600.0)], full=400)
    assert full["wall_s"] == 120.0
    assert full["peak_rss_mib"] == 900.0  # 500 before building + 4 x the 100 MiB growth


def test_the_cpu_table_counts_each_process_inside_each_stage_window(bench):
    """A process's CPU seconds inside a window (from its last sample before it, or from zero when it started
    inside it) over the window's length, summed by role; a process not sampled inside a window is left out."""
    from proc_cpu import CpuSampler

    sampler = CpuSampler(root_pid=1)
    sampler.series = {
        1: ("perseval parent", 0.0, [(5.0, 5.0), (15.0, 6.0), (25.0, 6.5), (35.0, 7.0)]),
        2: ("dask worker", 0.0, [(5.0, 1.0), (15.0, 2.0), (20.0, 3.0)]),  # ended after 20.0
        3: ("dask worker", 12.0, [(13.0, 0.5), (20.0, 1.0)]),  # started inside the run window
        4: ("llama-server", 25.0, [(26.0, 2.0), (30.0, 9.0)]),  # only inside the judge window
    }
    table = sampler.table({"run": (10.0, 20.0), "judge": (20.0, 30.0)})
    # the parent: 5.5 at 10 and 6.25 at 20, interpolated; the workers: 1.5 -> 3.0, and 0 -> 1.0
    assert table["run"] == {"seconds": 10.0, "perseval parent": 7.5, "dask worker": 25.0,
                            "processes": {"perseval parent": 1, "dask worker": 2}}
    assert table["judge"] == {"seconds": 10.0, "llama-server": 90.0, "perseval parent": 5.0,
                              "processes": {"llama-server": 1, "perseval parent": 1}}  # no worker seen inside
