"""Runs read back from the MLflow store for the views: the parent runs a command names, their records and
their per-sample logs (what `compare` and `samples` render, wherever the store is)."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from mlflow.tracking import MlflowClient

from perseval.core.suggest import suggestion
from perseval.report.record import ARTIFACT_DIR, DIGEST_TAG, INSTANCES, RECORD, SAMPLES, RunRecord, read_record

PROGRESS_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def quiet_artifacts() -> None:
    """No "Downloading artifacts" progress bar per artifact read (MLflow prints one per download)."""
    import os

    os.environ[PROGRESS_ENV] = "false"


@dataclass
class Parents:
    """The parent runs a view compares, oldest first, and those it left out (a re-run whose results equal the
    run before it: the same record digest)."""

    runs: list[Any]
    skipped: list[Any]


def parent_runs(client: MlflowClient, specs: list[str], n_latest: int = 2) -> Parents:
    """The parent runs that `specs` name, oldest first: a run id (or its first 8+ characters) names that run;
    an experiment name names its latest `n_latest` finished parent runs whose results differ from the run
    before them (a cached re-run repeats them: skipped, and listed as such). A run named by id is never
    skipped. A name that is neither: ValueError with the closest experiment names (or all of them)."""
    out: list[Any] = []
    skipped: list[Any] = []
    for spec in specs:
        exp = client.get_experiment_by_name(spec)
        if exp is not None:
            runs = client.search_runs([exp.experiment_id], filter_string="attributes.status = 'FINISHED'",
                                      max_results=5000)
            kept, repeats = _distinct_results(sorted((r for r in runs if "mlflow.parentRunId" not in r.data.tags),
                                                     key=_age))
            shown = kept[-n_latest:]
            out += shown
            skipped += [r for r in repeats if shown and _age(r) > _age(shown[0])]
            continue
        experiments = client.search_experiments()
        matches = [r for e in experiments for r in client.search_runs([e.experiment_id], max_results=5000)
                   if r.info.run_id.startswith(spec)]
        if len(matches) != 1 or "mlflow.parentRunId" in matches[0].data.tags:
            names = [e.name for e in experiments if e.name != "Default"]
            raise ValueError(f"{spec!r} is neither an MLflow experiment nor the id of one perseval parent run; "
                             f"{suggestion(spec, names)}")
        out.append(matches[0])
    unique = list({r.info.run_id: r for r in out}.values())
    return Parents(sorted(unique, key=_age), skipped)


def _age(run: Any) -> tuple[int, int]:
    """Oldest first: by start, then by end (runs of one process share the process's start time)."""
    return run.info.start_time or 0, run.info.end_time or 0


def _distinct_results(runs: list[Any]) -> tuple[list[Any], list[Any]]:
    """(runs kept, runs skipped) of `runs` (oldest first): a run whose record digest equals the last kept
    run's repeats its results (a cached re-run) and is skipped; a run logged before records is kept."""
    kept: list[Any] = []
    repeats: list[Any] = []
    for r in runs:
        digest = r.data.tags.get(DIGEST_TAG)
        (repeats if kept and digest and kept[-1].data.tags.get(DIGEST_TAG) == digest else kept).append(r)
    return kept, repeats


def _artifact(client: MlflowClient, run_id: str, name: str, tmp: str) -> Path | None:
    """The run's `record/<name>` artifact downloaded into `tmp` (None where the run has none)."""
    if not [f for f in client.list_artifacts(run_id, ARTIFACT_DIR) if f.path.endswith(name)]:
        return None
    return Path(client.download_artifacts(run_id, f"{ARTIFACT_DIR}/{name}", tmp))


def download_record(client: MlflowClient, run_id: str) -> RunRecord | None:
    """The record logged to a parent run (None: a run logged before records existed); RecordError, naming the
    run's artifact, for one that cannot be read."""
    with tempfile.TemporaryDirectory() as tmp:
        file = _artifact(client, run_id, RECORD, tmp)
        if file is None:
            return None
        _artifact(client, run_id, INSTANCES, tmp)  # beside it where the record keeps its instances there
        return read_record(file, shown=f"the record of run {run_id[:8]} (MLflow artifact {ARTIFACT_DIR}/{RECORD})")


def sample_lines(client: MlflowClient, record: RunRecord) -> Iterator[dict[str, Any]]:
    """The per-sample log of a record's results: its own run's samples.jsonl, or, for a re-run that repeated
    them from the cache, that of the run that computed them (a re-run logs none of its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        for run_id in dict.fromkeys((record.run_id, record.computed_by)):
            path = _artifact(client, run_id, SAMPLES, tmp)
            if path is not None:
                with open(path) as fh:
                    for line in fh:
                        if line.strip():
                            yield json.loads(line)
                return


def latest_parent(client: MlflowClient) -> str | None:
    """The id of the newest finished perseval parent run in the store (None when there is none)."""
    newest = []
    for e in client.search_experiments():
        runs = client.search_runs([e.experiment_id], filter_string="attributes.status = 'FINISHED'",
                                  order_by=["attributes.start_time DESC"], max_results=50)
        first = next((r for r in runs if "mlflow.parentRunId" not in r.data.tags and DIGEST_TAG in r.data.tags), None)
        if first is not None:
            newest.append(first)
    return max(newest, key=_age).info.run_id if newest else None
