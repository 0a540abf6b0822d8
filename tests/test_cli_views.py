"""The smaller view items of issue 42: `perseval --help` names every registered benchmark, an experiment is
named by its file or its `name:`, stage seconds read as one line, `stats` tables keep their rows whole with
counts as integers and a groupby's tuple index readable."""
from __future__ import annotations

import pandas as pd
from rich.console import Console
from typer.testing import CliRunner

from perseval.report.views.run import stage_line
from perseval_flows.cli import _mlflow_experiment, app
from perseval.report.views.frames import frame_table
from perseval.kernel.registry import BENCHMARKS

from .conftest import CONFIGS

runner = CliRunner()


def test_help_names_every_registered_benchmark():
    text = " ".join(runner.invoke(app, ["--help"], terminal_width=300).output.split())
    names = BENCHMARKS.names()  # the registry itself, every built-in module imported
    assert {"iba", "bespoke", "apeb", "prefeval", "persona_mem"} <= set(names)
    for name in names:
        assert name in text, (name, text)


def test_an_experiment_is_named_by_its_file_or_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(CONFIGS.parent)  # the repository: configs/experiments/quickstart.yaml
    by_name = runner.invoke(app, ["validate", "quickstart"])
    by_file = runner.invoke(app, ["validate", "configs/experiments/quickstart.yaml"])
    assert by_name.exit_code == by_file.exit_code and by_name.output.split("—")[1] == by_file.output.split("—")[1]
    assert _mlflow_experiment("quickstart") == _mlflow_experiment("configs/experiments/quickstart.yaml") \
        == "perseval-quickstart"
    assert _mlflow_experiment("0123abcd") == "0123abcd"  # a run id stays one
    bad = runner.invoke(app, ["validate", "no-such-experiment"])
    assert bad.exit_code == 2 and "does not exist" in bad.output and "no-such-experiment.yaml" in bad.output


def test_stage_seconds_are_one_readable_line():
    line = stage_line({"prepare": 1.234, "construct": 10.0, "run": 144.5})
    assert line == "stage seconds: prepare 1.2, construct 10.0, run 144.5 (sum 155.7)"
    assert "{" not in line and "'" not in line


def test_stats_tables_keep_rows_whole_with_integer_counts_and_a_readable_index():
    frame = pd.DataFrame({"domain": ["Travel planning and booking"] * 2 + ["Health"] * 2,
                          "dynamic": [True, False] * 2, "instances": [12.0, 30.0, 7.0, 1.0],
                          "share": [0.125, 0.5, 0.333, 0.042]}).groupby(["domain", "dynamic"]).sum()
    console = Console(width=60, record=True)
    console.print(frame_table(frame, "iba: by domain"))
    text = console.export_text()
    assert "('" not in text and "12.0" not in text  # no tuple index, counts whole
    row = next(ln for ln in text.splitlines() if "Travel planning and booking / True" in ln)
    assert " 12 " in f"{row} " and "0.12" in row  # the whole row on one line
    assert max(len(ln) for ln in text.splitlines()) <= 60
