"""The track stage: the run record built once, then rendered into MLflow and the run's output folder.

1. The record's cells from the stage outputs in one typed pass (perseval.report.build), and its instances from
   every output of every cell, one agent run at a time (gather): one user, score, status and the verdicts per
   instance, and each cell's lines of the per-sample log; only the outcomes that get a trace are kept.
2. Whether these results equal the previous record's of the same experiment (its results digest): a cached
   re-run computes nothing new, so it writes no trace, links none again, logs no Parquet outputs and no
   per-sample log; its child runs and record name the run that computed the results (`computed_by`). Where no
   score or probe output was written since the previous record (unchanged_since), its cells and instances are
   taken as they are instead of built again.
3. The parent MLflow run (the headline as printed, its metrics, the cross-benchmark table, the controls, the
   judges' validity, the analyses) and one child run per cell, control cells too, each rendered from the
   record; the traces (sampled: perseval.report.sink.traces.resolve_selection) linked to them.
4. record.json (instances.parquet past INLINE_INSTANCES) and samples.jsonl in the run's record folder, logged
   to the parent run under `record/`.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import mlflow
import pandas as pd
import psutil
import yaml
from mlflow.tracking import MlflowClient

from perseval.core.owner import owner_tag
from perseval.core.store import MANIFEST, StageStore
from perseval.experiment.config import ResolvedExperiment
from perseval.metrics.ci_tables import cluster_of
from perseval.pipeline.cost import PlanCost
from perseval.pipeline.units import Cell, Plan
from perseval.pipeline.probes import probe_units
from perseval.report.analyses.status import ScoreManifest
from perseval.report.build import build_cells
from perseval.report.record import (ARTIFACT_DIR, COMPUTED_BY_TAG, DIGEST_TAG, RECORD, SAMPLES, CellRecord, Cost,
                                    ExperimentRef, InstanceRecord, RunRecord, Traces, Verdict, latest_record,
                                    make_record, record_dir, records_dir, results_digest, write_record)
from perseval.report.sink.samples_log import assemble_samples, link_samples, write_cell_samples
from perseval.report.sink.traces import (Outcomes, chosen, log_traces, n_outputs, resolve_selection, run_outcomes,
                                        with_steps)
from perseval.report.sink.tracking import (OWNER_KEY, cell_tags, describe_run, ensure_experiment, log_cell,
                                           log_table, log_texts, mark_abandoned_runs, mlflow_key, start_parent_run,
                                           table_metrics, tracking_lock)
from perseval.report.sink.validity import log_run_validity
from perseval.report.views.cross_benchmark import cross_benchmark_markdown
from perseval.report.views.probe_check import flag_tags
from perseval.report.views.run import headline_markdown
from perseval.report.views.samples import samples_html
from perseval.report.views.summary import summary_row

log = logging.getLogger(__name__)


def cell_frame(score: Mapping[str, Any] | list[dict[str, Any]]) -> pd.DataFrame:
    """A cell's score table (its ScoreManifest's `table`, or the summary dict holding it), indexed by group."""
    table = pd.DataFrame(score.get("table", []) if isinstance(score, Mapping) else score)
    return table.set_index("group") if not table.empty else table


def track(exp: ResolvedExperiment, plan: Plan, root: str, scores: dict[str, Any], analyses: dict[str, dict[str, Any]],
          stats: dict[str, float], costs: PlanCost, base: Path | None = None,
          request_cache: str | None = None) -> RunRecord:
    """Build the run's record and log it, with the parent run and one child run per cell; returns the record
    (`request_cache`: where the per-sample log reads the messages each output sent)."""
    with tracking_lock(exp.experiment.mlflow, base):
        return _track(exp, plan, root, scores, analyses, stats, costs, base, request_cache)


def instance_records(cell: CellRecord, outcomes: Outcomes) -> list[InstanceRecord]:
    """A cell's instances as the record holds them: one user (the score's cluster), score, status, verdicts."""
    out = []
    for (iid, repeat), o in sorted(outcomes.items()):
        verdicts = sorted(o.judgments, key=lambda j: (j.kind, j.item_id, j.judge_repeat))
        out.append(InstanceRecord(cell=cell.key, instance_id=iid, repeat=repeat, user=o.cluster or cluster_of(o.instance),
                                  group=o.instance.group, score=o.score, status=o.status,
                                  verdicts=[Verdict(kind=j.kind, item_id=j.item_id, judge_repeat=j.judge_repeat,
                                                    score=j.score, status=j.status, rationale=j.feedback or "",
                                                    p_true=j.p_true) for j in verdicts]))
    return out


def cell_metrics(cell: CellRecord) -> dict[str, float]:
    """A child run's metrics, from its record cell: the score (as `headline` and under its metric's name) with
    its interval and users, what was left out, its difference to the baseline, its controls and probe check,
    its cost. A cell that is not interpretable logs none of its score's figures."""
    e, s, d, k = cell.estimate, cell.status, cell.difference, cell.cost
    values: dict[str, Any] = {"headline": e.point, mlflow_key(cell.metric): e.point, "ci_low": e.low,
                              "ci_high": e.high, "se": e.se, "n_users": e.users, "effective_users": e.effective_users,
                              "n": s.scored, "instances": s.instances, "scored_share": s.scored_share,
                              "outputs_invalid": s.invalid_outputs, "outputs_failed": s.failed_outputs,
                              "items_unscored": s.unscored_items, "judgments_failed": s.failed_judgments}
    if d is not None:
        values |= {"delta_vs_baseline": d.point, "delta_ci_low": d.low, "delta_ci_high": d.high,
                   "delta_p": d.p_holm, "mde": d.mde}
    c = cell.controls
    for kind, ref in (("personalization", "swapped"), ("history", "no_history")):
        g = getattr(c, kind) if c is not None else None
        if g is not None:
            values |= {f"controls.{kind}_gain": g.point, f"controls.{kind}_gain_ci_low": g.low,
                       f"controls.{kind}_gain_ci_high": g.high, f"controls.{kind}_gain_p_holm": g.p_holm,
                       f"controls.{ref}_score": g.reference_score}
        elif c is not None and c.zero_by_construction:
            values[f"controls.{kind}_gain"] = 0.0
    if cell.attribution is not None:
        a = cell.attribution
        values |= {"controls.evidence_recall": a.evidence_recall, "controls.score_evidence_reached": a.score_reached,
                   "controls.score_evidence_missed": a.score_missed}
    if cell.probe is not None:
        p = cell.probe
        values |= {"judge_auc": p.auc, "judge_pass_rate_gold": p.pass_rate_gold, "judge_pass_rate_bad": p.pass_rate_bad,
                   "judge_discriminates": None if p.discriminates is None else float(p.discriminates),
                   "judge_threshold": p.threshold}
    values |= {f: getattr(k, f) for f in ("tokens_in", "tokens_out", "llm_seconds", "wall_seconds", "cost_usd")}
    values |= {"this_run.tokens_in": k.new_tokens_in, "this_run.tokens_out": k.new_tokens_out,
               "this_run.cost_usd": k.new_cost_usd}
    return {name: float(v) for name, v in values.items() if v is not None}


def _child(exp: ResolvedExperiment, plan_cell: Cell, cell: CellRecord, s: ScoreManifest, costs: PlanCost, root: str,
           computed_by: str | None) -> str:
    """One cell's child run: tags, params and metrics from its record; its per-group means and, where this run
    computed its results, its score table and Parquet outputs (a cached re-run's are the computing run's)."""
    tags = cell_tags(plan_cell, cell.label, cell.metric, cell.status.word)
    if computed_by:
        tags[COMPUTED_BY_TAG] = computed_by
    if not cell.interpretable:
        tags["perseval.uninterpretable"] = cell.estimate.uninterpretable_reason or ""
    spend = costs.cells[plan_cell.key]  # per stage: the tokens, seconds and dollars of its run and judge
    metrics = spend["cell"].metrics() | spend["run"].metrics("run") | spend["judge"].metrics("judge") | {
        "score.wall_seconds": spend["score"].wall_seconds}
    table = cell_frame(s.table)
    if cell.interpretable and not table.empty:  # the means per group (the Overall ones are the record's)
        metrics |= table_metrics(table, s.metrics)
    metrics |= cell_metrics(cell)
    dirs = {} if computed_by else {stage: StageStore(root, stage, key).dir for stage, key in
                                   (("run", plan_cell.run.key), ("judge", plan_cell.judged.key), ("score", plan_cell.key))}
    shown = table if cell.interpretable and not computed_by and not table.empty else None
    return log_cell(exp, plan_cell, tags, metrics, shown, dirs)


def _parent_metrics(record: RunRecord, plan: Plan, stats: Mapping[str, float], costs: PlanCost) -> dict[str, float]:
    """The run's stage statistics and cost, and each plain cell's score and interval named after the cell
    (`headline/<cell>`, `/ci_low`, `/ci_high`), so MLflow's compare view lines the same cell up across runs."""
    out = {**stats, **costs.total.metrics()}
    for name, spend in costs.by_benchmark(plan).items():
        out |= spend.metrics(f"construct.{name}")
    for c in record.plain_cells():
        name = "headline/" + "/".join(mlflow_key(part) for part in c.name.split("/"))
        for suffix, value in (("", c.estimate.point), ("/ci_low", c.estimate.low), ("/ci_high", c.estimate.high)):
            if value is not None:
                out[name + suffix] = float(value)
    return out


def _parent(exp: ResolvedExperiment, plan: Plan, root: str, record: RunRecord, analyses: dict[str, dict[str, Any]],
            stats: Mapping[str, float], costs: PlanCost) -> None:
    """Into the active parent run: params, status, metrics, the headline as printed, the cells' rows, the
    cross-benchmark table, the controls, the judges' validity and the analyses."""
    mlflow.log_params({"experiment.name": exp.experiment.name, "experiment.file": exp.path,
                       "experiment.seed": str(exp.experiment.seed), "experiment.key": exp.key()})
    incomplete = sum(c.status.word == "incomplete" for c in record.plain_cells())
    mlflow.set_tags({"perseval.status": "incomplete" if incomplete else "complete",
                     "perseval.incomplete_cells": str(incomplete), **flag_tags(record.cells)})
    mlflow.log_metrics(_parent_metrics(record, plan, stats, costs))
    shown = headline_markdown(record)
    describe_run(shown)  # the headline as the terminal shows it
    files = {"headline.md": shown, "resolved_experiment.yaml": yaml.safe_dump(exp.model_dump(), sort_keys=False)}
    if (across := cross_benchmark_markdown(record.cells)) is not None:  # agent kinds x benchmarks
        files["cross_benchmark.md"] = across
    files["headline.csv"] = pd.DataFrame([summary_row(c) for c in record.cells]).to_csv(index=False)
    log_texts(files)
    _log_controls(record)
    if record.computed_by == record.run_id:  # else the run that computed the results logged them
        log_run_validity(plan, root)  # judge vs human labels where the data has them, and judges' reliability
    for unit in plan.analyses:  # the paper's tables and figures, per benchmark
        if analyses[unit.key]["files"]:
            mlflow.log_artifacts(str(StageStore(root, "analysis", unit.key).dir), f"analysis/{unit.data.name}")


def _log_controls(record: RunRecord) -> None:
    """controls/cells and controls/gains_by_metric: every gain of the record as a table."""
    rows, by_metric = [], []
    for c in record.plain_cells():
        k = c.controls
        if k is None and c.attribution is None:
            continue
        row: dict[str, Any] = {"cell": c.label, "benchmark": c.parts.benchmark, "score": c.estimate.point,
                               "note": k.note if k else None}
        for kind in ("personalization", "history"):
            g = getattr(k, kind) if k else None
            row |= {f"{kind}_gain": g.point if g else (0.0 if k and k.zero_by_construction else None),
                    f"{kind}_ci_low": g.low if g else None, f"{kind}_ci_high": g.high if g else None,
                    f"{kind}_p_holm": g.p_holm if g else None, f"{kind}_own": g.own if g else None,
                    f"{kind}_reference": g.reference_score if g else None, f"{kind}_users": g.users if g else None}
        if c.attribution is not None:
            row |= {"evidence_recall": c.attribution.evidence_recall}
        rows.append(row)
        by_metric += [{"cell": c.label, **m.model_dump()} for m in (k.by_metric if k else [])]
    if rows:
        log_table(pd.DataFrame(rows).set_index(["benchmark", "cell"]), "cells", "controls")
    if by_metric:
        log_table(pd.DataFrame(by_metric).set_index(["cell", "metric"]), "gains_by_metric", "controls")


def unchanged_since(prior: RunRecord, plan: Plan, root: str) -> bool:
    """Whether `prior` (the latest record of this experiment's settings, written by this version of its schema)
    holds this plan's results: the same cells, and no score or probe output written since it was."""
    written = record_dir(root, prior.run_id) / RECORD
    if prior.upgraded_from is not None or not written.is_file() or \
            {c.key for c in prior.cells} != {c.key for c in plan.cells}:
        return False
    since = written.stat().st_mtime
    manifests = [StageStore(root, "score", c.key).dir / MANIFEST for c in plan.cells] + \
        [StageStore(root, "probe", u.key).dir / MANIFEST for u in probe_units(plan)]
    return all(m.is_file() and m.stat().st_mtime <= since for m in manifests)


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


def _track(exp: ResolvedExperiment, plan: Plan, root: str, scores: dict[str, Any], analyses: dict[str, dict[str, Any]],
           stats: dict[str, float], costs: PlanCost, base: Path | None, request_cache: str | None) -> RunRecord:
    ensure_experiment(exp.experiment.mlflow, base)
    experiment = mlflow.set_experiment(exp.experiment.mlflow.experiment)
    mark_abandoned_runs(MlflowClient(), experiment.experiment_id)  # runs a killed perseval left RUNNING
    manifests = {k: ScoreManifest.of(v) for k, v in scores.items()}
    by_key = {c.key: c for c in plan.cells}
    previous = latest_record(root, exp.key())
    prior = previous.record
    selection = resolve_selection(exp.experiment.mlflow.traces, n_outputs(root, plan.cells))
    parts = samples_parts(records_dir(root))  # each cell's samples lines until the record is written
    try:
        if prior is not None and unchanged_since(prior, plan, root):  # a cached re-run: the same results
            cells = [c.model_copy(update={"cost": Cost(**costs.cells[c.key]["cell"].row())}) for c in prior.cells]
            kept = Gathered(prior.instances)
        else:
            cells = build_cells(plan, root, manifests, costs)
            kept = gather(root, cells, by_key, manifests, selection, parts, request_cache)
        return _log(exp, plan, root, manifests, analyses, stats, costs, experiment.experiment_id, cells, kept, prior,
                    previous.damaged, selection, parts)
    finally:
        shutil.rmtree(parts, ignore_errors=True)


PARTS_PREFIX = ".samples-"


def samples_parts(folder: Path) -> Path:
    """A scratch folder for the cells' samples lines in `folder`, named after this process; those of a process
    that is gone (a track killed before it removed its own) are removed first."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{PARTS_PREFIX}*-*"):
        pid = old.name[len(PARTS_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{PARTS_PREFIX}{os.getpid()}-", dir=folder))


@dataclass
class Gathered:
    """What the track stage keeps of the outcomes, read one agent run at a time: every instance record, the
    outcomes that get a trace, how many outputs each cell has and every answer (the samples pages)."""

    instances: list[InstanceRecord]
    traced: dict[str, Outcomes] = field(default_factory=dict)  # cell key -> the outcomes `selection` keeps
    outputs: dict[str, int] = field(default_factory=dict)  # cell key -> its agent outputs
    answers: dict[str, dict[tuple[str, int], str]] = field(default_factory=dict)


def gather(root: str, cells: list[CellRecord], by_key: dict[str, Cell], manifests: dict[str, ScoreManifest],
           selection: str | int, parts: Path, request_cache: str | None) -> Gathered:
    """Every cell's instance records and its samples lines (into `parts`), one agent run's outcomes in memory
    at a time (at 20,000 instances all of them at once held over a gigabyte); keeps what the traces and the
    samples pages need."""
    named = {c.key: c for c in cells}
    records: dict[str, list[InstanceRecord]] = {}
    kept = Gathered([])
    pairs = [(by_key[c.key], manifests[c.key].headline_metric) for c in cells]
    for per_run in run_outcomes(root, pairs, steps=False):  # the steps: only for the outputs traced
        keep = chosen(list(per_run.values()), selection)
        for key, outs in per_run.items():
            records[key] = instance_records(named[key], outs)
            write_cell_samples(parts, named[key], records[key], outs, request_cache)
            kept.traced[key] = with_steps(root, by_key[key], {k: o for k, o in outs.items() if k in keep})
            kept.outputs[key] = len(outs)
            kept.answers[key] = {k: o.output.text for k, o in outs.items()}
    kept.instances = [i for c in cells for i in records.get(c.key, [])]
    return kept


def _log(exp: ResolvedExperiment, plan: Plan, root: str, manifests: dict[str, ScoreManifest],
         analyses: dict[str, dict[str, Any]], stats: dict[str, float], costs: PlanCost, experiment_id: str,
         cells: list[CellRecord], kept: Gathered, prior: RunRecord | None, damaged: list[str], selection: str | int,
         parts: Path) -> RunRecord:
    """The parent and child runs, the traces, the record and the per-sample log, from the cells and what
    `gather` kept (`manifests`: the cells' score manifests, as _track read them)."""
    by_key = {c.key: c for c in plan.cells}
    instances = kept.instances
    digest = results_digest(cells, instances)  # trace ids are not in it: the same before and after the traces
    repeat = prior is not None and prior.results_digest == digest
    ref = ExperimentRef(name=exp.experiment.name, file=exp.path, settings_digest=exp.key(),
                        mlflow_experiment=exp.experiment.mlflow.experiment)
    timings = {k.split(".", 1)[1]: float(v) for k, v in stats.items() if k.startswith("seconds.")}
    requests = int(stats["llm_requests"]) if "llm_requests" in stats else None
    with start_parent_run(exp, experiment_id, {OWNER_KEY: owner_tag()}) as parent:
        run_id = parent.info.run_id
        computed_by = prior.computed_by if repeat and prior else None
        child = {c.key: _child(exp, by_key[c.key], c, manifests[c.key], costs, root, computed_by) for c in cells}
        cells = [c.model_copy(update={"mlflow_run_id": child[c.key]}) for c in cells]
        if repeat and prior:  # the same instances: their traces are the earlier run's, linked to its child runs
            ids = {(i.cell, i.instance_id, i.repeat): i.trace_id for i in prior.instances}
            traced = prior.traces
        else:
            written = log_traces(root, [(by_key[c.key], child[c.key], manifests[c.key].headline_metric) for c in cells],
                                 kept.traced, experiment_id, selection, {c.key: c.label for c in cells})
            ids = {(k, *ik): tid for k, by in written.items() for ik, tid in by.items()}
            traced = _traced(cells, by_key, kept.outputs, written, selection)
        instances = [replace(i, trace_id=ids.get((i.cell, i.instance_id, i.repeat))) for i in instances]
        record = make_record(run_id, ref, cells, instances, prior, timings, requests, traced, digest)
        if damaged and record.computed_by == run_id:
            record = _computed_by_from_tags(record, damaged)
        folder = write_record(record, root)
        _parent(exp, plan, root, record, analyses, stats, costs)
        if record.computed_by == run_id:
            assemble_samples(parts, folder, record.cells, record.instances)
            _samples_pages(record, kept.answers, experiment_id)
            mlflow.log_artifacts(str(folder), ARTIFACT_DIR)
        else:  # the per-sample log is the computing run's (linked here; `samples` reads that run's artifact)
            link_samples(folder, record_dir(root, record.computed_by))
            for f in sorted(p for p in folder.iterdir() if p.name != SAMPLES):
                mlflow.log_artifact(str(f), ARTIFACT_DIR)
        mlflow.set_tags({DIGEST_TAG: record.results_digest, COMPUTED_BY_TAG: record.computed_by})
        return record


def _traced(cells: list[CellRecord], by_key: dict[str, Cell], outputs: dict[str, int],
            written: dict[str, dict[tuple[str, int], str]], selection: str | int) -> Traces:
    """How many agent outputs have a trace, of how many (each agent run's outputs counted once)."""
    runs: dict[str, tuple[int, set[tuple[str, int]]]] = {}
    for c in cells:
        n, traced = runs.setdefault(by_key[c.key].run.key, (outputs.get(c.key, 0), set()))
        traced.update(written.get(c.key, {}))
    return Traces(selection=str(selection), traced=sum(len(t) for _, t in runs.values()),
                  outputs=sum(n for n, _ in runs.values()))


def _samples_pages(record: RunRecord, answers: dict[str, dict[tuple[str, int], str]], experiment_id: str) -> None:
    """Each cell's samples page (every instance with its verdicts and trace link) as an artifact of its child
    run; the links are root-relative, so they open in the UI that shows the artifact, wherever it runs."""
    client = MlflowClient()
    by_cell: dict[str, list[InstanceRecord]] = {}
    for i in record.instances:
        by_cell.setdefault(i.cell, []).append(i)
    for c in record.cells:
        client.log_text(c.mlflow_run_id, samples_html(c, by_cell.get(c.key, []), answers.get(c.key, {}), "",
                                                      experiment_id), "samples.html")
