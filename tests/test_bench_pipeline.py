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
