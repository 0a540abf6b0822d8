"""A damaged run record is data to report, never a traceback (issue 53): a record.json truncated, of another
schema, or edited is one line naming the file (or the run whose artifact it is) and what is wrong; `compare`
goes on with the runs it can read and says which it skipped; `samples --json` exits 2 with that line; a cached
re-run beside a damaged record still names the run that computed its results."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.report.record import RECORD, RecordError, read_record, record_dir
from tests.trace_runs import make_run, track_run


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """(root, [cold, cached re-run after the cold record was truncated], uri): the cold run's record damaged on
    disk before the re-run, and its MLflow copy truncated after it."""
    work = tmp_path_factory.mktemp("damaged")
    exp, plan, root = make_run(work)
    cold = track_run(exp, plan, root, work)
    on_disk = record_dir(root, cold) / RECORD
    on_disk.write_text(on_disk.read_text()[:700])
    cached = track_run(exp, plan, root, work)
    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    artifact = Path(urlparse(MlflowClient(uri).get_run(cold).info.artifact_uri).path) / "record" / RECORD
    artifact.write_text(artifact.read_text()[:700])
    return root, [cold, cached], uri


def test_a_cached_rerun_beside_a_truncated_record_names_the_run_that_computed_it(damaged):
    root, (cold, cached), _ = damaged
    record = read_record(record_dir(root, cached))
    assert record.run_id == cached and record.computed_by == cold  # not "this run computed it"


def test_compare_skips_the_run_whose_record_is_truncated_and_shows_the_rest(damaged, tmp_path, monkeypatch):
    _, (cold, cached), uri = damaged
    monkeypatch.chdir(tmp_path)  # compare writes nothing where it runs (it made ./mlruns/artifacts)
    out = CliRunner().invoke(app, ["compare", cold, cached, "--tracking-uri", uri], terminal_width=200)
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output and not isinstance(out.exception, json.JSONDecodeError)
    line = next(ln for ln in out.output.splitlines() if ln.startswith(f"skipped {cold[:8]}"))
    assert f"the record of run {cold[:8]} (MLflow artifact record/record.json): not valid JSON" in line
    runs = next(ln for ln in out.output.splitlines() if ln.startswith("runs (oldest first):"))
    assert cached[:8] in runs and cold[:8] not in runs
    only = CliRunner().invoke(app, ["compare", cold, "--tracking-uri", uri], terminal_width=200)
    assert only.exit_code == 2 and "no run named has a record that can be read" in only.output


def test_samples_json_of_a_truncated_record_is_one_line_exit_2(damaged):
    _, (cold, _), uri = damaged
    out = CliRunner().invoke(app, ["samples", cold, "iba-rag/stub-judge", "--json", "--tracking-uri", uri])
    assert out.exit_code == 2, out.output
    assert f"the record of run {cold[:8]}" in out.output and "not valid JSON" in out.output
    assert "Traceback" not in out.output and "logged before perseval wrote run records" not in out.output


@pytest.mark.parametrize("damage, says", [
    (lambda d: json.dumps(d | {"schema_version": 99}), "schema_version 99; this perseval reads 1 and 2"),
    (lambda d: json.dumps({k: v for k, v in d.items() if k != "cells"}), "cells: Field required"),
    (lambda d: json.dumps(d | {"cells": [{"key": "x"}]}), "cells.0."),
    (lambda d: "[]", "a record is a JSON object, this is list"),
    (lambda d: json.dumps(d)[:300], "not valid JSON"),
])
def test_read_record_names_the_file_and_what_is_wrong(damaged, tmp_path, damage, says):
    root, (_, cached), _ = damaged
    data = json.loads((record_dir(root, cached) / RECORD).read_text())
    bad = tmp_path / RECORD
    bad.write_text(damage(data))
    with pytest.raises(RecordError) as err:
        read_record(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{bad}: ") and says in message and "\n" not in message


def test_a_missing_instances_file_is_named(tmp_path):
    from perseval.report.record import ExperimentRef, make_record, write_record
    from tests.record_helpers import many_instances

    ref = ExperimentRef(name="e", file="e.yaml", settings_digest="d", mlflow_experiment="m")
    folder = write_record(make_record("run1", ref, [], many_instances(2100), None), tmp_path)
    (folder / "instances.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(RecordError, match="its instances file instances.parquet cannot be read"):
        read_record(folder)


def test_samples_json_of_a_record_without_the_cell_says_so(damaged):
    """A record edited to drop its cells: not 'logged before records, or a control cell' (neither is true)."""
    _, (_, cached), uri = damaged
    artifact = Path(urlparse(MlflowClient(uri).get_run(cached).info.artifact_uri).path) / "record" / RECORD
    kept = artifact.read_text()
    try:
        artifact.write_text(json.dumps(json.loads(kept) | {"cells": []}))
        out = CliRunner().invoke(app, ["samples", cached, "iba-rag/stub-judge", "--json", "--tracking-uri", uri])
    finally:
        artifact.write_text(kept)
    assert out.exit_code == 2, out.output
    assert "its record has no cell" in out.output and "the record was edited" in out.output
    assert "logged before perseval wrote run records" not in out.output
