"""Headline table of a run and its record in MLflow."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from perseval.report.comparisons import baseline_comparisons, comparison_fields
from perseval.experiment.config import ResolvedExperiment
from perseval.pipeline.cost import PlanCost
from perseval.report.cross_benchmark import cross_benchmark_markdown
from perseval.report.gains import control_metrics, log_control_tables
from perseval.report.judge_check import log_run_validity
from perseval.report.probes import flag_tags
from perseval.report.record import (ARTIFACT_DIR, COMPUTED_BY_TAG, DIGEST_TAG, CellRecord, ExperimentRef,
                                    InstanceRecord, RunRecord, cell_record, instance_records, latest_record,
                                    make_record, record_metrics, write_record)
from perseval.report.rows import HeadlineRow, ScoreManifest, spread
from perseval.metrics.aggregate import OVERALL
from perseval.core.owner import owner_tag
from perseval.pipeline.plan import Cell, Plan
from perseval.core.store import StageStore
from perseval.report.samples import local_samples, log_samples_pages
from perseval.report.traces import log_traces, n_outputs, resolve_selection
from perseval.report.tables import headline_markdown
from perseval.report.tracking import (OWNER_KEY, describe_run, ensure_experiment, headline_metrics, log_cell,
                                      log_parent_summary, mark_abandoned_runs, start_parent_run, tracking_lock)

log = logging.getLogger(__name__)

SMALL_MODEL_WARNING = (
    "Note: the embedded default serves a 135M-parameter model. Its answers and judgments are weak: this run "
    "shows that the pipeline works end to end and how fast, not how good an agent is.")


def cell_frame(score: Mapping[str, Any] | list[dict[str, Any]]) -> pd.DataFrame:
    """A cell's score table (its ScoreManifest's `table`, or the summary dict holding it), indexed by group."""
    table = pd.DataFrame(score.get("table", []) if isinstance(score, Mapping) else score)
    return table.set_index("group") if not table.empty else table


def is_complete(score: Mapping[str, Any] | ScoreManifest) -> bool:
    """A cell is complete when no agent output and no judgment of it failed (a re-run redoes those)."""
    return ScoreManifest.of(score).complete


def cell_status(score: Mapping[str, Any] | ScoreManifest) -> str:
    """complete / partly scored / unscored / incomplete, or "no items": the judge had nothing of the data to
    judge (the slot rule on a release without CallAPI instances; the plan is made before the data exists),
    never "complete" with n 0 (perseval.report.rows.ScoreManifest.status)."""
    return ScoreManifest.of(score).status


def headline(plan: Plan, scores: dict[str, Any], costs: PlanCost | None = None) -> pd.DataFrame:
    """The headline rows as a frame (for CSV and Markdown artifacts)."""
    return pd.DataFrame(headline_rows(plan, scores, costs))


def headline_rows(plan: Plan, scores: dict[str, Any], costs: PlanCost | None = None,
                  root: str | None = None) -> list[HeadlineRow]:
    """One row per cell: the headline metric over the scored instances with its user-clustered interval,
    beside it what was left out, and (given `costs`) what the cell cost: tokens, seconds and dollars in
    total and spent by this run. Given `root` (where the score outputs are), a cell of an entry that names
    a baseline also carries its difference to the baseline cell (perseval.report.comparisons). `scores`: cell
    key -> its ScoreManifest (or the score stage's summary dict).

    A cell with nothing scored (e.g. a rubric judge bound to an agent that leaves no trajectory) has score
    None and n 0; as plain records, not a frame, so the summary never turns them into NaN and 0.0."""
    manifests = {k: ScoreManifest.of(v) for k, v in scores.items()}
    compared = baseline_comparisons(plan, root, {c.key: manifests[c.key].headline_metric for c in plan.cells}) \
        if root else {}
    rows = []
    for cell in plan.cells:
        if cell.run.control is not None:  # a control's score is shown beside its plain cell (perseval.report.gains)
            continue
        rows.append(_row(plan, cell, manifests[cell.key], compared.get(cell.key), costs))
    return rows


def _row(plan: Plan, cell: Cell, s: ScoreManifest, comparison: Any, costs: PlanCost | None) -> HeadlineRow:
    table = cell_frame(s.table)
    overall = table.loc[OVERALL] if OVERALL in table.index else {}
    fields: dict[str, Any] = {
        "benchmark": cell.entry, "agent": cell.agent, "backbone": cell.backbone or "-",
        "retriever": cell.retriever, "judge": cell.judge, "metric": s.headline_metric,
        "score": _float(overall.get(s.headline_metric)), "n": _int(overall.get("n")) or 0,
        "unscored_items": _int(overall.get("unscored_items")) or 0, "unscored_share": _float(overall.get("unscored_share")),
        "invalid_outputs": s.outputs.get("invalid", 0), "failed_outputs": s.outputs.get("failed", 0),
        "failed_judgments": s.judgments.get("failed", 0), "status": s.status,
        **({"scored_share": round(100 * s.scored_share, 1)} if s.scored_share is not None else {}),
        **{k: _float(overall.get(k)) for k in ("ci_low", "ci_high")},
        **_spread_fields("se", _float(overall.get("se")), _float(overall.get("ci_low")), _float(overall.get("ci_high"))),
        "n_users": _int(overall.get("n_users")), "level": cell.statistics.level,
        "effective_users": _float(overall.get("effective_users")), "weighting": cell.statistics.weighting,
        "interval_note": overall.get("interval_note") if isinstance(overall.get("interval_note"), str) else None,
        **comparison_fields(comparison, _baseline(plan, cell)),
        **(costs.cells[cell.key]["cell"].row() if costs else {})}
    return HeadlineRow.of(fields)


def _spread_fields(name: str, se: float | None, low: float | None, high: float | None) -> dict[str, Any]:
    """{name: the SE (None where it says nothing of the interval)} and, then, {name_reason: why}."""
    value, reason = spread(se, low, high)
    return {name: value, **({f"{name}_reason": reason} if reason else {})}


def headline_note(rows: Sequence[Mapping[str, Any]], wide: bool = False) -> str:
    """How to read the headline (printed under the table): only the columns and status words it shows."""
    from perseval.report.probes import DISCRIMINATION_AUC, PASSES_EVERYTHING
    from perseval.report.tables import judge_text, status_legend

    level = next((r["level"] for r in rows if r.get("level")), 0.95)
    note = (f"[CI]: the two ends of the {100 * level:g}% user-clustered interval of the score (asymmetric near 0 "
            "and 100); users/n: the users it rests on and the instances scored.")
    if any(r.get("weighting") == "user" for r in rows):
        note += " Where statistics.weighting is user, a score is the mean of its users' means."
    if withheld := [r for r in rows if r.get("interval_note")]:
        note += (f" {len(withheld)} score(s) without an interval: {withheld[0]['interval_note']}.")
    tests = sum(r.get("delta_p") is not None for r in rows)
    if any(r.get("baseline") for r in rows):
        note += (" Δ: difference to the benchmark's baseline agent over the instances both cells scored, with its "
                 f"paired user-clustered interval; p: sign-flip test over users, Holm-corrected across the {tests} "
                 "comparison(s) of this table.")
        if wide:
            note += (" MDE: the smallest difference detectable (80% power, α 0.05) with this many users - a smaller "
                     "Δ is no evidence either way; blank where the users' differences do not vary (no SE).")
        few = min((r["delta_n_users"] for r in rows if r.get("delta_n_users") is not None), default=None)
        if few is not None and few < 6:
            note += (f" With {few} users no sign-flip p can be below {2 / 2 ** few:.3g} (2 of the 2^{few} sign "
                     "patterns are as extreme as any result): add users.")
    if any(judge_text(r) for r in rows):
        note += (f" AUC: of the cell's judge, on answers of known verdict (judge_probes); ✓ it discriminates "
                 f"(AUC >= {DISCRIMINATION_AUC}, < {100 * PASSES_EVERYTHING:.0f}% of bad passed), ✗ it does not: "
                 "that row's score is not interpretable.")
    if not wide and (legend := status_legend(rows)):
        note += " " + legend + "."
    return note


def _baseline(plan: Plan, cell: Cell) -> str | None:
    return plan.exp.experiment.benchmarks[cell.bench_index].baseline


def _float(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def _int(value: Any) -> int | None:
    return None if value is None or value != value else int(value)


def track(exp: ResolvedExperiment, plan: Plan, root: str, scores: dict[str, dict[str, Any]],
          analyses: dict[str, dict[str, Any]], stats: dict[str, float], costs: PlanCost,
          rows: list[HeadlineRow] | list[dict[str, Any]], base: Path | None = None) -> str:
    """Log the parent run and one child run per cell (`rows`: the run's headline rows, made once by the
    caller for its summary too); returns the parent run id."""
    with tracking_lock(exp.experiment.mlflow, base):
        return _track(exp, plan, root, scores, analyses, stats, costs, base, [HeadlineRow.of(r) for r in rows])


UNCERTAINTY_METRICS = ("ci_low", "ci_high", "se", "n_users", "effective_users", "delta_effective_users",
                       "delta_vs_baseline", "delta_ci_low", "delta_ci_high",
                       "delta_p", "mde")


def uncertainty_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """A cell's interval of its headline score (and its difference to the baseline) as MLflow metrics."""
    return {k: float(row[k]) for k in UNCERTAINTY_METRICS if row.get(k) is not None}


def cost_metrics(plan: Plan, costs: PlanCost) -> dict[str, float]:
    """The parent run's cost metrics: the run's total over distinct units, and each benchmark's construction."""
    out = costs.total.metrics()
    for name, spend in costs.by_benchmark(plan).items():
        out |= spend.metrics(f"construct.{name}")
    return out


def _track(exp: ResolvedExperiment, plan: Plan, root: str, scores: dict[str, dict[str, Any]],
           analyses: dict[str, dict[str, Any]], stats: dict[str, float], costs: PlanCost, base: Path | None,
           rows: list[HeadlineRow]) -> str:
    ensure_experiment(exp.experiment.mlflow, base)
    experiment = mlflow.set_experiment(exp.experiment.mlflow.experiment)
    mark_abandoned_runs(MlflowClient(), experiment.experiment_id)  # runs a killed perseval left RUNNING
    plain = [c for c in plan.cells if c.run.control is None]  # headline_rows: one row per plain cell, in order
    row_of = {c.key: r for c, r in zip(plain, rows)}
    with start_parent_run(exp, experiment.experiment_id, {OWNER_KEY: owner_tag()}) as parent:
        log_parent_summary(exp, pd.DataFrame(rows), {**stats, **cost_metrics(plan, costs),
                                                      **headline_metrics(plain, rows)})
        describe_run(headline_markdown(rows))  # the compact headline, as the terminal shows it (perseval.report.tables)
        if (across := cross_benchmark_markdown(rows, exp)) is not None:  # agent kinds x benchmarks
            mlflow.log_text(across, "cross_benchmark.md")
        log_run_validity(plan, root)  # judge vs human labels where the data has them (perseval.report.judge_check)
        mlflow.set_tags(flag_tags(rows))  # a probed judge that does not discriminate (perseval.report.probes)
        log_control_tables(plan, root, rows)  # the gains per metric and the controls of every cell (perseval.report.gains)
        for unit in plan.analyses:  # the paper's tables and figures, per benchmark
            if analyses[unit.key]["files"]:
                mlflow.log_artifacts(str(StageStore(root, "analysis", unit.key).dir),
                                     f"analysis/{unit.data.name}")
        selection, traced = resolve_selection(exp.experiment.mlflow.traces, n_outputs(root, plan.cells)), []
        records = {c.key: cell_record(c, row_of[c.key], _overall(scores[c.key]), None) for c in plain}
        for cell in plan.cells:  # a control cell has no headline row of its own: its gains are on its plain cell
            s = ScoreManifest.of(scores[cell.key])
            table = cell_frame(s.table)
            # a plain cell's interval as the record holds it (what every view prints)
            extra = (record_metrics(records[cell.key]) if cell.key in records else {}) | {
                "outputs_invalid": float(s.outputs.get("invalid", 0)), "outputs_failed": float(s.outputs.get("failed", 0)),
                "judgments_unscored": float(s.judgments.get("unscored", 0)),
                "judgments_failed": float(s.judgments.get("failed", 0))}
            spend = costs.cells[cell.key]  # the cell's tokens, seconds and dollars, in total and per stage
            extra |= spend["cell"].metrics() | spend["run"].metrics("run") | spend["judge"].metrics("judge")
            extra["score.wall_seconds"] = spend["score"].wall_seconds
            extra |= control_metrics(cell, rows)  # the gains beside the score (perseval.report.gains)
            dirs = {stage: StageStore(root, stage, key).dir for stage, key in
                    (("run", cell.run.key), ("judge", cell.judged.key), ("score", cell.key))}
            traced.append((cell, log_cell(exp, cell, table, s.metrics, extra, dirs, status=s.status),
                           s.headline_metric))
        runs = log_traces(root, traced, experiment.experiment_id, selection)  # every instance as an MLflow trace
        log_samples_pages(MlflowClient(), runs, experiment.experiment_id)  # a score -> its instances
        child = {cell.key: run_id for cell, run_id, _ in traced}
        instances = [i for t in runs for (cell, _, _), outcomes in zip(t.cells, t.outcomes) if cell.key in records
                     for i in instance_records(cell.key, local_samples(outcomes, t.ids))]
        log_record(exp, parent.info.run_id, root, [r.model_copy(update={"mlflow_run_id": child[k]})
                                                   for k, r in records.items()], instances, stats)
        return parent.info.run_id


def _overall(score: Mapping[str, Any]) -> dict[str, Any]:
    table = cell_frame(ScoreManifest.of(score).table)
    return dict(table.loc[OVERALL]) if OVERALL in table.index else {}


def _computed_by_from_tags(record: RunRecord, damaged: list[str]) -> RunRecord:
    """A record under the output root cannot be read, so the records cannot say whether an earlier run computed
    these results: the parent runs' tags can (each carries its results digest and the run that computed them).
    The newest earlier run with these results names who computed them; without one, this run did."""
    for line in damaged:
        log.warning("record skipped: %s", line)
    active = mlflow.active_run()
    earlier = mlflow.search_runs(
        [active.info.experiment_id], filter_string=f"tags.`{DIGEST_TAG}` = '{record.results_digest}'",
        order_by=["attributes.start_time DESC"], output_format="list") if active else []
    by = next((r.data.tags.get(COMPUTED_BY_TAG) for r in earlier if r.info.run_id != record.run_id), None)
    return record.model_copy(update={"computed_by": by}) if by else record


def log_record(exp: ResolvedExperiment, run_id: str, root: str, cells: list[CellRecord],
               instances: list[InstanceRecord], stats: Mapping[str, float]) -> RunRecord:
    """The run's record (perseval.report.record): written into the run's output folder once, logged to the
    parent run (the active one) with its results digest and the run that computed them as tags."""
    ref = ExperimentRef(name=exp.experiment.name, file=exp.path, settings_digest=exp.key(),
                        mlflow_experiment=exp.experiment.mlflow.experiment)
    timings = {k.split(".", 1)[1]: float(v) for k, v in stats.items() if k.startswith("seconds.")}
    requests = int(stats["llm_requests"]) if "llm_requests" in stats else None
    previous = latest_record(root, exp.key(), before=run_id)
    record = make_record(run_id, ref, cells, instances, previous.record, timings, requests)
    if previous.damaged and record.computed_by == run_id:
        record = _computed_by_from_tags(record, previous.damaged)
    mlflow.log_artifacts(str(write_record(record, root)), ARTIFACT_DIR)
    mlflow.set_tags({DIGEST_TAG: record.results_digest, COMPUTED_BY_TAG: record.computed_by})
    return record
