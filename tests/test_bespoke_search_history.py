"""Bespoke's history-free settings read no history (issue 31): in the paper and CPU configs no agent's
search reads a corpus that holds the users' visited-page summaries, as `perseval show` reports them."""
import shutil

import pytest

from perseval.report.show import effective_settings
from perseval.experiment.load import load_experiment
from tests.conftest import REPO
from tests.bespoke_official import official  # noqa: F401 (fixture)
from perseval.experiment.load import experiment_file


def _searching_over_user_pages(settings: dict) -> list[str]:
    """Agents whose `search: corpus` reads an entry whose corpus holds the users' page summaries: search then
    returns the user's own pages in the swapped-history run too."""
    out = []
    for entry, bench in settings["benchmarks"].items():
        params = bench["params"]
        reads_pages = bool(params.get("corpus") and params.get("corpus_page_summaries"))  # users' own pages
        out += [f"{entry}/{a}" for a, spec in bench["agents"].items()
                if spec["params"].get("search") == "corpus" and reads_pages]
    return out


def test_the_paper_config_has_no_search_over_users_own_pages(official, monkeypatch):
    paper = (experiment_file("bespoke_paper")).resolve()
    monkeypatch.chdir(official.parent)  # the paper config reads the release from data/bespoke
    shutil.copytree(official, official.parent / "data" / "bespoke")
    settings = effective_settings(load_experiment(paper))
    assert any(s["params"].get("search") == "corpus" for b in settings["benchmarks"].values()
               for s in b["agents"].values())  # the check has something to check
    assert _searching_over_user_pages(settings) == []


@pytest.mark.parametrize("config", ["bespoke_cpu"])
def test_the_cpu_config_has_none_either_and_the_default_would(config, tmp_path):
    settings = effective_settings(load_experiment(experiment_file(config)))
    assert _searching_over_user_pages(settings) == []
    bench = settings["benchmarks"]["bespoke"]
    flipped = {"benchmarks": {"bespoke": {**bench, "params": {**bench["params"], "corpus_page_summaries": True}}}}
    assert _searching_over_user_pages(flipped)  # the default (page summaries in the corpus) is caught
