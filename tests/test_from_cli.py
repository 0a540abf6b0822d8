"""`perseval run <benchmark> --model ... --limit N` has the cache keys of the equivalent experiment file."""
from __future__ import annotations

import pytest
import yaml

from perseval.core.errors import ConfigError
from perseval.pipeline.plan import make_plan
from perseval.experiment.load import experiment_file, load_experiment
from perseval.experiment.from_cli import cli_experiment, is_benchmark_list, write_experiment


def _keys(path) -> dict:
    plan = make_plan(load_experiment(path))
    return {"data": [d.key for d in plan.data], "index": [i.key for i in plan.index],
            "runs": sorted(r.key for r in plan.runs()), "cells": sorted((c.name, c.key) for c in plan.cells)}


def test_command_line_lamp_has_the_keys_of_its_file(tmp_path) -> None:
    made = write_experiment(cli_experiment(["lamp"], models=["smollm2-135m"], limit=3), tmp_path)
    # the equivalent file: lamp's CPU experiment with sample 3 written by hand, elsewhere
    data = yaml.safe_load(experiment_file("lamp_cpu").read_text())
    for entry in data["benchmarks"]:
        entry["sample"] = 3
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "lamp.yaml").write_text(yaml.safe_dump(data))
    assert _keys(made) == _keys(tmp_path / "own" / "lamp.yaml")
    assert _keys(made)["cells"]


def test_limit_changes_the_data_key(tmp_path) -> None:
    two = _keys(write_experiment(cli_experiment(["lamp"], limit=2), tmp_path))
    three = _keys(write_experiment(cli_experiment(["lamp"], limit=3), tmp_path))
    assert two["data"] != three["data"]


def test_two_benchmarks_merge_or_are_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="differ in 'overrides'"):  # would change keys: refused
        cli_experiment(["lamp", "lamp_qa"])
    with pytest.raises(ConfigError, match="differ in 'judges'"):
        cli_experiment(["lamp", "bespoke"])
    # with the judge named once for both, each entry keeps its own file's controls and seed
    both = _keys(write_experiment(cli_experiment(["lamp", "bespoke"], judges=["smollm2-judge"]), tmp_path))
    alone = _keys(experiment_file("lamp_cpu"))
    assert set(alone["data"]) <= set(both["data"]) and set(alone["runs"]) <= set(both["runs"])


@pytest.mark.parametrize("kwargs, option, near", [({"models": ["smollm2-13m"]}, "--model", "smollm2-135m"),
                                                  ({"agents": ["lamp-orcale"]}, "--agents", "lamp-oracle")])
def test_a_wrong_name_names_the_option_and_the_closest(kwargs, option, near) -> None:
    with pytest.raises(ConfigError, match=f"{option}: .*did you mean '{near}'"):
        cli_experiment(["lamp"], **kwargs)


def test_benchmark_names() -> None:
    assert is_benchmark_list("lamp,iba") and not is_benchmark_list("quickstart")
    with pytest.raises(ConfigError, match="did you mean 'lamp'"):
        cli_experiment(["lmap"])


def test_print_config_is_the_experiment_the_command_runs(tmp_path) -> None:
    from typer.testing import CliRunner

    from perseval_flows.cli import app

    out = CliRunner().invoke(app, ["run", "lamp", "--model", "smollm2-135m", "--limit", "3", "--print-config"])
    assert out.exit_code == 0, out.output
    (tmp_path / "printed.yaml").write_text(out.stdout)
    made = write_experiment(cli_experiment(["lamp"], models=["smollm2-135m"], limit=3), tmp_path)
    assert _keys(tmp_path / "printed.yaml") == _keys(made)
    wrong = CliRunner().invoke(app, ["run", "lamp", "--agents", "lamp-orcale", "--print-config"])
    assert wrong.exit_code == 2 and "did you mean 'lamp-oracle'" in wrong.output
    refused = CliRunner().invoke(app, ["run", "quickstart", "--model", "smollm2-135m"])
    assert refused.exit_code == 2 and "go with benchmark names" in refused.output
