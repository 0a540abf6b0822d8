"""MLflow on SQLite: one parent run per experiment run, one child run per cell.

Params hold the full resolved configuration of every model, retriever and
judge of a cell; metrics hold overall and per-group scores; artifacts hold the
score tables (CSV, Markdown) and the cell's Parquet outputs.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import yaml
from mlflow.tracking import MlflowClient

from perseval.config import MLflowSettings, ResolvedExperiment
from perseval.metrics.aggregate import OVERALL
from perseval.plan import Cell

MAX_PARAM = 6000


def resolve_tracking(settings: MLflowSettings, base: Path | None = None) -> tuple[str, str]:
    """(tracking_uri, artifact_location) with relative sqlite/artifact paths made absolute."""
    base = base or Path.cwd()
    uri = settings.tracking_uri
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        db = (base / uri[len("sqlite:///"):]).resolve()
        db.parent.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{db}"
    artifacts = (base / settings.artifact_root).resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    return uri, artifacts.as_uri()


def ensure_experiment(settings: MLflowSettings, base: Path | None = None) -> str:
    uri, artifacts = resolve_tracking(settings, base)
    mlflow.set_tracking_uri(uri)
    found = mlflow.get_experiment_by_name(settings.experiment)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(settings.experiment, artifact_location=f"{artifacts}/{settings.experiment}")


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
    params.update(flatten("agent", cell.run.agent.model_dump()))
    if cell.backbone:
        params.update(flatten("backbone", exp.models[cell.backbone].model_dump()))
        params.update(flatten("backbone_deployment", exp.deployments[cell.backbone].model_dump()))
    if cell.run.index is not None:
        params.update(flatten("retriever", cell.run.index.retriever.model_dump()))
    else:
        params["retriever"] = "-"
    spec = cell.judged.judge
    params.update(flatten("judge", {"name": spec.name, "kinds": ",".join(spec.kinds), "params": spec.params,
                                    "repeats": spec.repeats}))
    if spec.model:
        params.update(flatten("judge.sampling", (spec.sampling.model_dump() if spec.sampling else {})))
        params.update(flatten("judge_model", exp.models[spec.model].model_dump()))
        params.update(flatten("judge_deployment", exp.deployments[spec.model].model_dump()))
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


def log_table(table: pd.DataFrame, name: str, artifact_dir: str | None = "tables") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table.to_csv(Path(tmp) / f"{name}.csv")
        (Path(tmp) / f"{name}.md").write_text(table.to_markdown(floatfmt=".1f") if not table.empty else "(empty)\n")
        mlflow.log_artifacts(tmp, artifact_dir)


def log_cell(exp: ResolvedExperiment, cell: Cell, table: pd.DataFrame, metrics: list[str],
             extra_metrics: dict[str, float], parquet_dirs: dict[str, Path], complete: bool = True) -> str:
    """`complete` False: some output or judgment failed, so the scores cover only the rest (tag
    perseval.status = incomplete; a re-run redoes the failed parts)."""
    with mlflow.start_run(run_name=cell.name, nested=True) as run:
        mlflow.set_tags({"perseval.cell": cell.name, "perseval.benchmark": cell.benchmark,
                         "perseval.status": "complete" if complete else "incomplete",
                         "perseval.agent": cell.agent, "perseval.backbone": cell.backbone or "-",
                         "perseval.retriever": cell.retriever, "perseval.judge": cell.judge,
                         "perseval.judge_model": cell.judge_model or "-",
                         "perseval.headline_metric": mlflow_key(metrics[0]) if metrics else ""})
        mlflow.log_params(cell_params(exp, cell))
        mlflow.log_metrics({**table_metrics(table, metrics), **extra_metrics})
        log_table(table, "scores")
        for label, folder in parquet_dirs.items():
            for part in sorted(Path(folder).glob("part-*.parquet")):
                mlflow.log_artifact(str(part), f"parquet/{label}")
        return run.info.run_id


def log_parent_summary(exp: ResolvedExperiment, headline: pd.DataFrame, stats: dict[str, float]) -> None:
    mlflow.log_params({"experiment.name": exp.experiment.name, "experiment.file": exp.path,
                       "experiment.seed": str(exp.experiment.seed), "experiment.key": exp.key()})
    incomplete = int((headline["status"] == "incomplete").sum()) if "status" in headline else 0
    mlflow.set_tags({"perseval.status": "incomplete" if incomplete else "complete",
                     "perseval.incomplete_cells": str(incomplete)})
    mlflow.log_metrics(stats)
    log_table(headline, "headline", None)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "resolved_experiment.yaml").write_text(yaml.safe_dump(exp.model_dump(), sort_keys=False))
        mlflow.log_artifacts(tmp)


def compare_frame(experiment: str, settings: MLflowSettings, n_parents: int = 2) -> pd.DataFrame:
    """Rows: cells; columns: the latest `n_parents` parent runs; values: each cell's headline score."""
    uri, _ = resolve_tracking(settings)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return pd.DataFrame()
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=5000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.info.status == "FINISHED"]
    parents = parents[:n_parents]
    columns = {p.info.run_id: f"{p.info.run_name} {p.info.run_id[:8]}" for p in parents}
    rows: dict[str, dict[str, float]] = {}
    for r in runs:
        parent = r.data.tags.get("mlflow.parentRunId")
        if parent in columns:
            metric = r.data.tags.get("perseval.headline_metric", "")
            rows.setdefault(r.data.tags.get("perseval.cell", r.info.run_name), {})[columns[parent]] = \
                r.data.metrics.get(metric, float("nan"))
    frame = pd.DataFrame.from_dict(rows, orient="index")
    return frame.reindex(columns=[columns[p.info.run_id] for p in parents]).sort_index()
