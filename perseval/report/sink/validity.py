"""Judges' agreement with human labels and their reliability, logged to MLflow: a `judge-check` run of its own,
or the parent run of `perseval run` (judge_validity/)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import mlflow
import pandas as pd

from perseval.experiment.config import MLflowSettings
from perseval.metrics.validity import validity_table
from perseval.pipeline.units import Plan
from perseval.report.analyses.judge_agreement import data_label_pairs
from perseval.report.analyses.reliability import reliability_table
from perseval.report.sink.tracking import ensure_experiment, log_table, mlflow_key


def validity_metrics(table: pd.DataFrame) -> dict[str, float]:
    out = {}
    for _, row in table.iterrows():
        for stat in ("pearson", "spearman", "kappa", "alpha"):
            v = row.get(stat)
            if v is not None and v == v:
                out[f"validity.{mlflow_key(row['judge'])}.{mlflow_key(row['criterion'])}.{stat}"] = float(v)
    return out


def log_validity(settings: MLflowSettings, name: str, table: pd.DataFrame, matrices: dict[str, pd.DataFrame],
                 base: Path | None = None) -> str:
    """A run `judge-check <name>` holding the table, the confusion matrices and one metric per statistic."""
    ensure_experiment(settings, base)
    mlflow.set_experiment(settings.experiment)
    with mlflow.start_run(run_name=f"judge-check {name}", tags={"perseval.kind": "judge-check"}) as run:
        log_validity_artifacts(table, matrices)
        return run.info.run_id


def log_validity_artifacts(table: pd.DataFrame, matrices: dict[str, pd.DataFrame]) -> None:
    """Into the active MLflow run: judge_validity/validity.{csv,md}, one confusion_*.csv each, metrics."""
    log_table(table.set_index(["judge", "criterion"]), "validity", "judge_validity")
    with tempfile.TemporaryDirectory() as tmp:
        for key, matrix in matrices.items():
            matrix.to_csv(Path(tmp) / f"confusion_{mlflow_key(key).replace('/', '_')}.csv")
        mlflow.log_artifacts(tmp, "judge_validity")
    mlflow.log_metrics(validity_metrics(table))


def log_run_validity(plan: Plan, root: str) -> None:
    """Into the active (parent) MLflow run: the validity table of every evaluator whose data carries human
    labels (Bespoke's meta-test), beside the paper's Table 3, and the judges' reliability table (against each
    other and themselves: no label needed), when any LLM judge scored."""
    pairs = data_label_pairs(plan, root)
    if pairs:
        log_validity_artifacts(*validity_table(pairs, seed=plan.exp.experiment.seed))
    reliability = reliability_table(plan, root)
    if not reliability.empty:
        log_table(reliability.set_index(["benchmark", "run", "judge"]), "reliability", "judge_validity")
