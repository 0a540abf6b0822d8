"""Headline table of a run and its record in MLflow."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from perseval.config import ResolvedExperiment
from perseval.cost import PlanCost
from perseval.metrics.aggregate import OVERALL
from perseval.owner import owner_tag
from perseval.plan import Plan
from perseval.store import StageStore
from perseval.traces import log_traces, n_outputs, resolve_selection
from perseval.tracking import (OWNER_KEY, ensure_experiment, headline_metrics, log_cell, log_parent_summary,
                                mark_abandoned_runs, start_parent_run, tracking_lock)

SMALL_MODEL_WARNING = (
    "Note: the embedded default serves a 135M-parameter model. Its answers and judgments are weak: this run "
    "shows that the pipeline works end to end and how fast, not how good an agent is.")


def cell_frame(score: dict[str, Any]) -> pd.DataFrame:
    table = pd.DataFrame(score.get("table", []))
    return table.set_index("group") if not table.empty else table


def is_complete(score: dict[str, Any]) -> bool:
    """A cell is complete when no agent output and no judgment of it failed (a re-run redoes those)."""
    return not score["outputs"].get("failed", 0) and not score["judgments"].get("failed", 0)


def headline(plan: Plan, scores: dict[str, dict[str, Any]], costs: PlanCost | None = None) -> pd.DataFrame:
    """The headline rows as a frame (for CSV and Markdown artifacts)."""
    return pd.DataFrame(headline_rows(plan, scores, costs))


def headline_rows(plan: Plan, scores: dict[str, dict[str, Any]],
                  costs: PlanCost | None = None) -> list[dict[str, Any]]:
    """One row per cell: the headline metric over the scored instances, beside it what was left out, and
    (given `costs`) what the cell cost: tokens, seconds and dollars in total and spent by this run.

    A cell with nothing scored (e.g. a rubric judge bound to an agent that leaves no trajectory) has score
    None and n 0; as plain records, not a frame, so the summary never turns them into NaN and 0.0."""
    rows = []
    for cell in plan.cells:
        s = scores[cell.key]
        table = cell_frame(s)
        metric = s["headline_metric"]
        overall = table.loc[OVERALL] if OVERALL in table.index else {}
        share = overall.get("unscored_share")
        rows.append({"benchmark": cell.benchmark, "agent": cell.agent, "backbone": cell.backbone or "-",
                     "retriever": cell.retriever, "judge": cell.judge, "metric": metric,
                     "score": _float(overall.get(metric)), "n": _int(overall.get("n")) or 0,
                     "unscored_items": _int(overall.get("unscored_items")) or 0, "unscored_share": _float(share),
                     "invalid_outputs": s["outputs"].get("invalid", 0), "failed_outputs": s["outputs"].get("failed", 0),
                     "failed_judgments": s["judgments"].get("failed", 0),
                     "status": "complete" if is_complete(s) else "incomplete",
                     **(costs.cells[cell.key]["cell"].row() if costs else {})})
    return rows


def _float(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def _int(value: Any) -> int | None:
    return None if value is None or value != value else int(value)


def track(exp: ResolvedExperiment, plan: Plan, root: str, scores: dict[str, dict[str, Any]],
          analyses: dict[str, dict[str, Any]], stats: dict[str, float], costs: PlanCost,
          rows: list[dict[str, Any]], base: Path | None = None) -> str:
    """Log the parent run and one child run per cell (`rows`: the run's headline rows, made once by the
    caller for its summary too); returns the parent run id."""
    with tracking_lock(exp.experiment.mlflow, base):
        return _track(exp, plan, root, scores, analyses, stats, costs, base, rows)


def cost_metrics(plan: Plan, costs: PlanCost) -> dict[str, float]:
    """The parent run's cost metrics: the run's total over distinct units, and each benchmark's construction."""
    out = costs.total.metrics()
    for name, spend in costs.by_benchmark(plan).items():
        out |= spend.metrics(f"construct.{name}")
    return out


def _track(exp: ResolvedExperiment, plan: Plan, root: str, scores: dict[str, dict[str, Any]],
           analyses: dict[str, dict[str, Any]], stats: dict[str, float], costs: PlanCost, base: Path | None,
           rows: list[dict[str, Any]]) -> str:
    ensure_experiment(exp.experiment.mlflow, base)
    experiment = mlflow.set_experiment(exp.experiment.mlflow.experiment)
    mark_abandoned_runs(MlflowClient(), experiment.experiment_id)  # runs a killed perseval left RUNNING
    with start_parent_run(exp, experiment.experiment_id, {OWNER_KEY: owner_tag()}) as parent:
        log_parent_summary(exp, pd.DataFrame(rows), {**stats, **cost_metrics(plan, costs),
                                                      **headline_metrics(plan.cells, rows)})
        for unit in plan.analyses:  # the paper's tables and figures, per benchmark
            if analyses[unit.key]["files"]:
                mlflow.log_artifacts(str(StageStore(root, "analysis", unit.key).dir),
                                     f"analysis/{unit.data.entry.name}")
        selection, traced = resolve_selection(exp.experiment.mlflow.traces, n_outputs(root, plan.cells)), []
        for cell in plan.cells:
            s = scores[cell.key]
            table = cell_frame(s)
            extra = {"outputs_invalid": float(s["outputs"].get("invalid", 0)),
                     "outputs_failed": float(s["outputs"].get("failed", 0)),
                     "judgments_unscored": float(s["judgments"].get("unscored", 0)),
                     "judgments_failed": float(s["judgments"].get("failed", 0))}
            spend = costs.cells[cell.key]  # the cell's tokens, seconds and dollars, in total and per stage
            extra |= spend["cell"].metrics() | spend["run"].metrics("run") | spend["judge"].metrics("judge")
            extra["score.wall_seconds"] = spend["score"].wall_seconds
            dirs = {stage: StageStore(root, stage, key).dir for stage, key in
                    (("run", cell.run.key), ("judge", cell.judged.key), ("score", cell.key))}
            traced.append((cell, log_cell(exp, cell, table, s["metrics"], extra, dirs, complete=is_complete(s)),
                           s["headline_metric"]))
        log_traces(root, traced, experiment.experiment_id, selection)  # every instance as an MLflow trace
        return parent.info.run_id
