"""MLflow on SQLite, the store the record is logged to: one parent run per experiment run, one child run per
cell (perseval.report.sink.track writes them from the record).

Params hold the full resolved configuration of every model, retriever and judge of a cell; metrics hold its
record's figures and its score table's per-group means; artifacts hold the score table (CSV, Markdown) and the
cell's Parquet outputs.
"""
from __future__ import annotations

import math
import sqlite3
import tempfile
import time
from contextlib import closing, nullcontext
from pathlib import Path
from typing import Any, ContextManager

import mlflow
import pandas as pd
import psutil
from filelock import FileLock
from mlflow.tracking import MlflowClient

from perseval.experiment.config import MLflowSettings, ResolvedExperiment
from perseval.metrics.aggregate import OVERALL
from perseval.core.owner import owner_gone
from perseval.pipeline.units import Cell
from perseval.report.store_paths import resolve_tracking, sqlite_path

MAX_PARAM = 6000


def tracking_lock(settings: MLflowSettings, base: Path | None = None) -> ContextManager[Any]:
    """A lock beside an SQLite tracking database: two runs finishing at once would otherwise both create
    its tables (or the experiment) and one would fail. Other back ends handle concurrency themselves."""
    uri, _ = resolve_tracking(settings, base)
    if not uri.startswith("sqlite:///"):
        return nullcontext()
    return FileLock(uri[len("sqlite:///"):] + ".lock")


def write_ahead(uri: str) -> None:
    """Put an SQLite tracking database in write-ahead-log mode (a setting of the file, kept): each trace span
    and assessment is its own commit, and a WAL commit costs about a third of a rollback-journal one here
    (tests/test_traces.py: a 24-trace track 33 s -> 21 s). Readers (the UI) no longer block the writer."""
    db = sqlite_path(uri)
    if db is not None and db.parent.is_dir():
        with closing(sqlite3.connect(db)) as con:
            con.execute("PRAGMA journal_mode=WAL")


def ensure_experiment(settings: MLflowSettings, base: Path | None = None) -> str:
    uri, artifacts = resolve_tracking(settings, base)
    write_ahead(uri)
    mlflow.set_tracking_uri(uri)
    found = mlflow.get_experiment_by_name(settings.experiment)
    if found is None:
        made = mlflow.create_experiment(settings.experiment, artifact_location=f"{artifacts}/{settings.experiment}",
                                        tags={EXPERIMENT_KIND: "custom_model_development"})
        return made
    if EXPERIMENT_KIND not in found.tags:  # traces alone make the UI take it for a GenAI app: open on its runs
        MlflowClient().set_experiment_tag(found.experiment_id, EXPERIMENT_KIND, "custom_model_development")
    return found.experiment_id


def flatten(prefix: str, obj: Any) -> dict[str, str]:
    """Nested config -> {'a.b.c': 'value'}; long values are cut to MLflow's limit."""
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(f"{prefix}.{k}" if prefix else str(k), v))
    else:
        out[prefix] = str(obj)[:MAX_PARAM]
    return out


def cell_params(exp: ResolvedExperiment, cell: Cell) -> dict[str, str]:
    """Every model, deployment, retriever and judge configuration of a cell, flattened; keys never logged."""
    entry = exp.experiment.benchmarks[cell.bench_index]
    params: dict[str, str] = {}
    params.update(flatten("benchmark", entry.model_dump(exclude={"agents", "judges"})))
    agent = cell.run.agent
    params.update(flatten("agent", {"name": agent.name, "kind": agent.kind,
                                    "params": agent.params.model_dump(mode="json")}))
    if cell.backbone:
        params.update(flatten("backbone", exp.models[cell.backbone].model_dump()))
        params.update(flatten("backbone_deployment", exp.deployments[cell.backbone].model_dump()))
    if cell.run.index is not None:
        params.update(flatten("retriever", cell.run.index.retriever.model_dump()))
    else:
        params["retriever"] = "-"
    spec = cell.judged.judge
    params.update(flatten("judge", {"name": spec.name, "kinds": ",".join(spec.kinds), "params": spec.params_json(),
                                    "repeats": spec.repeats, **({"threshold": "calibrated"} if spec.calibrated else {})}))
    if spec.model and spec.sampling:
        params.update(flatten("judge.sampling", spec.sampling.model_dump()))
        params.update(flatten("judge_model", spec.model.model_dump()))
        params.update(flatten("judge_deployment", exp.deployments[spec.model.name].model_dump()))
    params.update({"experiment.seed": str(exp.experiment.seed), "experiment.repeats": str(exp.experiment.repeats),
                   "key.data": cell.run.data.key, "key.index": cell.run.index.key if cell.run.index else "-",
                   "key.run": cell.run.key, "key.judge": cell.judged.key, "key.score": cell.key})
    return {k: v for k, v in params.items() if "api_key" not in k.lower() or k.endswith("_env")}


def mlflow_key(name: str) -> str:
    """MLflow names allow alphanumerics and _-. :/ only: hit@1 -> hit_at_1."""
    name = name.replace("@", "_at_")
    return "".join(ch if ch.isalnum() or ch in "_-. :" else "_" for ch in name)


def metric_name(metric: str, group: str) -> str:
    return mlflow_key(metric) if group == OVERALL else f"{mlflow_key(metric)}/{mlflow_key(group)}"


def table_metrics(table: pd.DataFrame, metrics: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for group, row in table.iterrows():
        for m in metrics:
            v = row.get(m)
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                out[metric_name(m, str(group))] = float(v)
    return out


# Columns that hold fractions or probabilities, not 0-100 scores: to 0.1 they would lose their meaning (a 0.95
# level shown as 0.9, a p of 0.03 as 0.0); they keep three significant digits in a table's Markdown.
FRACTION_COLUMNS = ("level", "delta_p", "p", "p_value", "p_holm", "p (Holm)", "judge_auc", "auc", "kappa", "alpha")
FRACTION_SUFFIXES = ("_p", "_p_holm")  # a gain's p (personalization_p_holm, ...)


def _fraction(column: object) -> bool:
    return str(column) in FRACTION_COLUMNS or str(column).endswith(FRACTION_SUFFIXES)


def table_markdown(table: pd.DataFrame) -> str:
    """A table as Markdown: scores to 0.1, fractions and probabilities (FRACTION_COLUMNS, a gain's `*_p_holm`) to
    three significant digits (as in its CSV)."""
    if table.empty:
        return "(empty)\n"
    index = [".1f"] * (table.index.nlevels)
    return table.to_markdown(floatfmt=index + [".3g" if _fraction(c) else ".1f" for c in table.columns])


def log_table(table: pd.DataFrame, name: str, artifact_dir: str | None = "tables") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table.to_csv(Path(tmp) / f"{name}.csv")
        (Path(tmp) / f"{name}.md").write_text(table_markdown(table))
        mlflow.log_artifacts(tmp, artifact_dir)


def cell_tags(cell: Cell, label: str, metric: str, status: str) -> dict[str, str]:
    """The same tags on every benchmark's cells: what the cell is (its label as every view names it, its
    headline metric as its benchmark names it), its status, and the keys that locate its outputs."""
    return {"perseval.cell": cell.name, "perseval.label": label, "perseval.status": status,
            "perseval.benchmark": cell.entry, "perseval.agent": cell.agent,
            "perseval.agent_kind": cell.run.agent.kind, "perseval.backbone": cell.backbone or "-",
            "perseval.retriever": cell.retriever, "perseval.judge": cell.judge,
            "perseval.judge_model": cell.judge_model or "-", "perseval.repeats": str(cell.run.repeats),
            "perseval.judge_repeats": str(cell.judged.judge.repeats if cell.judged.judge.uses_llm else 1),
            "perseval.data_key": cell.run.data.key, "perseval.score_key": cell.key,
            "perseval.control": cell.run.control.name if cell.run.control else "-",
            "perseval.headline_metric": mlflow_key(metric), "perseval.metric": metric}


def log_cell(exp: ResolvedExperiment, cell: Cell, tags: dict[str, str], metrics: dict[str, float],
             table: pd.DataFrame | None, parquet_dirs: dict[str, Path]) -> str:
    """A cell's child run (of the active parent run): its tags and configuration, `metrics`, and, when given,
    its score table and the Parquet outputs of its stages. Returns its id."""
    with mlflow.start_run(run_name=cell.name, nested=True) as run:
        mlflow.set_tags(tags)
        mlflow.log_params(cell_params(exp, cell))
        mlflow.log_metrics(metrics)
        if table is not None:
            log_table(table, "scores")
        for label, folder in parquet_dirs.items():
            for part in sorted(Path(folder).glob("part-*.parquet")):
                mlflow.log_artifact(str(part), f"parquet/{label}")
        return run.info.run_id


OWNER_KEY = "perseval.owner"


def mark_abandoned_runs(client: MlflowClient, experiment_id: str) -> list[str]:
    """End as KILLED the RUNNING runs of `experiment_id` whose owner process is gone (a run killed while it
    logged stays RUNNING in the store forever otherwise), with their child runs. Returns the ids ended."""
    running = client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=5000)
    gone = {r.info.run_id for r in running if OWNER_KEY in r.data.tags and owner_gone(r.data.tags[OWNER_KEY])}
    ended = [r.info.run_id for r in running if r.info.run_id in gone or r.data.tags.get("mlflow.parentRunId") in gone]
    for run_id in ended:
        client.set_terminated(run_id, status="KILLED")
    return ended


def parent_run_name(exp: ResolvedExperiment, started: float) -> str:
    """Short enough for the UI's run column: the experiment and when it started (UTC, to the minute; a second
    run in the same minute gets #2). The configuration's key is the run's `experiment.key` param."""
    return f"{exp.experiment.name} {time.strftime('%m-%d %H:%M', time.gmtime(started))}"


def start_parent_run(exp: ResolvedExperiment, experiment_id: str, tags: dict[str, str],
                     started: float | None = None) -> mlflow.ActiveRun:
    """The parent run, started when the command started (`started`, default: this process's start), so its
    Duration in the UI is the run's, not the tracking step's; it ends when the returned context exits."""
    started = started if started is not None else psutil.Process().create_time()
    client = MlflowClient()
    name = first = parent_run_name(exp, started)
    while "'" not in name and client.search_runs([experiment_id], filter_string=f"attributes.run_name = '{name}'",
                                                  max_results=1):
        name = f"{first} #{int(name.rsplit('#', 1)[1]) + 1 if name != first else 2}"  # two runs in one process
    run = client.create_run(experiment_id, start_time=int(started * 1000), tags=tags, run_name=name)
    return mlflow.start_run(run_id=run.info.run_id)


EXPERIMENT_KIND = "mlflow.experimentKind"  # MLflow 3's UI opens a GenAI experiment on its usage page, others on runs
NOTE = "mlflow.note.content"  # a run's description in the UI


def describe_run(text: str) -> None:
    """The active run's description (Markdown) in the UI."""
    mlflow.set_tag(NOTE, text)


def log_texts(files: dict[str, str], artifact_dir: str | None = None) -> None:
    """Text files into the active run's artifacts, in one upload."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in files.items():
            (Path(tmp) / name).write_text(content)
        mlflow.log_artifacts(tmp, artifact_dir)
