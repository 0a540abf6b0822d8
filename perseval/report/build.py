"""The run record's cells, built once from the stage outputs in one typed pass (the track stage calls it).

Per cell (plain and control): its status and estimate from the score stage's report (perseval.report.analyses.
status), the probe check of its judge (perseval.pipeline.probes), its label and role; then, knowing which cells
are interpretable (a judge that does not discriminate makes its cells' numbers meaningless), each plain cell's
difference to its baseline (perseval.report.analyses.comparisons), its controls (perseval.report.analyses.gains)
and every cell's evidence attribution, each Holm family over the interpretable cells only; and its cost. The
views print these sections as they are: none recomputes a statistic.
"""
from __future__ import annotations

from typing import Any, Mapping

from perseval.experiment.config import ResolvedExperiment
from perseval.experiment.load import bound
from perseval.kernel.registry import agent_class
from perseval.metrics.uncertainty import mde
from perseval.pipeline.controls import uses_history
from perseval.pipeline.cost import PlanCost
from perseval.pipeline.units import Cell, Plan
from perseval.benchmarks.probes import GOOD
from perseval.pipeline.probes import UNCALIBRATED_NOTE, probe_reports
from perseval.report.analyses.comparisons import Comparison, baseline_comparisons, difference_mde
from perseval.report.analyses.gains import Values, attributions, controls
from perseval.report.analyses.status import ScoreManifest, number, spread, text, whole
from perseval.report.names import control_label, short_names
from perseval.report.record import CellRecord, Cost, Difference, Estimate, Parts, ProbeCheck, Status
from perseval.report.words import NOT_INTERPRETABLE


def agent_roles(exp: ResolvedExperiment) -> dict[str, str]:
    """Agent name -> its role in a personalization comparison: `oracle` (it is given the gold, or is a
    benchmark's `.oracle` kind), `no history` (it uses no history capability: the floor) or `history`."""
    out = {}
    for name, spec in bound(exp).agents.items():
        if getattr(agent_class(spec.kind), "reads_gold", False) or spec.kind.endswith(".oracle"):
            out[name] = "oracle"
        else:
            out[name] = "history" if uses_history(spec.needs) else "no history"
    return out


def labels(plan: Plan) -> dict[str, str]:
    """Cell key -> its label (perseval.report.names): the short name among its benchmark's plain cells; a
    control cell's is its plain cell's with the control."""
    plain = [c for c in plan.cells if c.run.control is None]
    out = dict(zip([c.key for c in plain], short_names([_parts(c) for c in plain])))
    for c in plan.cells:
        if c.run.control is not None:
            of = plain_of(plan, c)
            out[c.key] = control_label(out[of.key] if of else c.agent, c.run.control.name)
    return out


def _parts(cell: Cell) -> tuple[str, str, str, str, str]:
    return cell.entry, cell.agent, cell.backbone or "-", cell.retriever, cell.judge


def plain_of(plan: Plan, control: Cell) -> Cell | None:
    """The plain cell a control cell controls (the same entry, agent, backbone, retriever and judge)."""
    return next((c for c in plan.cells if c.run.control is None and c.bench_index == control.bench_index
                 and _parts(c) == _parts(control)), None)


# ---- the probe check ----------------------------------------------------------------------------------------

def probe_check(report: Mapping[str, Any]) -> ProbeCheck:
    """The probe stage's report of one judge (perseval.pipeline.probes.probe_report) as a typed check."""
    ci = report.get("auc_ci") or [None, None]
    calibrated = bool(report.get("calibrated"))
    flag = None
    if report["discriminates"] is False:
        flag = NOT_INTERPRETABLE + (f" ({UNCALIBRATED_NOTE})" if calibrated and report.get("threshold") is None
                                    else "")
    bad = report.get("n.bad")
    if bad is None:
        bad = (report.get("n.empty") or 0) + (report.get("n.wrong-user") or 0)
    return ProbeCheck(auc=report["auc"], auc_low=ci[0], auc_high=ci[1], auc_from=report.get("auc_from"),
                      pass_rate_gold=report.get("pass_rate.good", report.get(f"pass_rate.{GOOD}")),
                      pass_rate_bad=report.get("pass_rate.bad"), discriminates=report["discriminates"],
                      items=report.get("n_items"), gold_items=report.get("n.good", report.get(f"n.{GOOD}")),
                      bad_items=bad, threshold=report.get("threshold") if calibrated else None, flag=flag)


def probe_checks(plan: Plan, root: str) -> dict[tuple[str, str], ProbeCheck]:
    """(benchmark entry, judge) -> the check of every probed judge that judged something of known verdict."""
    return {k: probe_check(r) for k, r in probe_reports(plan, root).items() if r.get("discriminates") is not None}


# ---- one cell -------------------------------------------------------------------------------------------------

def status_of(s: ScoreManifest) -> Status:
    overall = s.overall
    share = s.scored_share
    return Status(word=s.status, instances=s.judged, scored=s.scored,
                  scored_share=round(100 * share, 1) if share is not None else None,
                  items=whole(overall.get("items")) or 0, unscored_items=whole(overall.get("unscored_items")) or 0,
                  unscored_item_share=number(overall.get("unscored_share")),
                  invalid_outputs=s.outputs.get("invalid", 0), failed_outputs=s.outputs.get("failed", 0),
                  failed_judgments=s.judgments.get("failed", 0))


def estimate_of(s: ScoreManifest, level: float, weighting: str, check: ProbeCheck | None) -> Estimate:
    """The score and its interval from the Overall row of the cell's score table; withheld, the mean kept as
    `uninterpretable_mean`, where the cell's judge does not discriminate."""
    overall = s.overall
    low, high = number(overall.get("ci_low")), number(overall.get("ci_high"))
    se, reason = spread(number(overall.get("se")), low, high)
    users = whole(overall.get("n_users"))
    point = number(overall.get(s.headline_metric))
    estimate = Estimate(point=point, low=low, high=high, level=level, users=users,
                        effective_users=number(overall.get("effective_users")), se=se, se_reason=reason,
                        mde=mde(se, users) if se is not None and users else None,
                        mde_reason=reason if se is None and reason else None,
                        note=text(overall.get("interval_note")), weighting=weighting)
    if check is not None and check.discriminates is False:
        return estimate.model_copy(update={"point": None, "low": None, "high": None, "se": None, "mde": None,
                                           "uninterpretable_mean": point, "uninterpretable_reason": check.flag})
    return estimate


def difference_of(comparison: Comparison) -> Difference:
    d = comparison.difference
    value, reason = difference_mde(d)
    return Difference(baseline=comparison.baseline.agent, baseline_cell=comparison.baseline.key, point=d.mean,
                      low=d.ci_low, high=d.ci_high, p_holm=comparison.p_holm, paired=d.paired, users=d.n_users,
                      effective_users=d.effective_users, mde=value, mde_reason=reason)


def _cell(plan: Plan, cell: Cell, s: ScoreManifest, check: ProbeCheck | None, label: str, role: str,
          costs: PlanCost | None, plain: Cell | None) -> CellRecord:
    return CellRecord(
        key=cell.key, name=cell.name, label=label,
        parts=Parts(benchmark=cell.entry, agent=cell.agent, backbone=cell.backbone or "-", retriever=cell.retriever,
                    judge=cell.judge),
        role=role, metric=s.headline_metric, control=cell.run.control.name if cell.run.control else None,
        plain=plain.key if plain is not None else None,
        baseline=plan.exp.experiment.benchmarks[cell.bench_index].baseline, data_key=cell.run.data.key,
        status=status_of(s),
        estimate=estimate_of(s, cell.statistics.level, cell.statistics.weighting, check), probe=check,
        cost=Cost(**costs.cells[cell.key]["cell"].row()) if costs else Cost())


def build_cells(plan: Plan, root: str, scores: Mapping[str, Any], costs: PlanCost | None = None) -> list[CellRecord]:
    """Every cell of the plan as the record holds it: the plain cells in the plan's order, each control cell
    right after its plain cell. `scores`: cell key -> its ScoreManifest (or the score stage's summary)."""
    manifests = {k: ScoreManifest.of(v) for k, v in scores.items()}
    checks, named, roles = probe_checks(plan, root), labels(plan), agent_roles(plan.exp)
    plain = {c.key: plain_of(plan, c) for c in plan.cells if c.run.control is not None}
    cells = {c.key: _cell(plan, c, manifests[c.key], checks.get((c.entry, c.judge)), named[c.key],
                          roles.get(c.agent, "history"), costs, plain.get(c.key)) for c in plan.cells}
    interpretable = {k for k, c in cells.items() if c.interpretable}
    values = Values(root, {k: m.headline_metric for k, m in manifests.items()})  # each cell's scores, read once
    compared = baseline_comparisons(plan, root, {k: m.headline_metric for k, m in manifests.items()}, interpretable,
                                    values.frame)
    controlled = controls(plan, root, lambda c: named[c.key], interpretable, values)
    evidence = attributions(plan, root, values, interpretable)
    for key, cell in cells.items():
        cells[key] = cell.model_copy(update={
            "difference": difference_of(compared[key]) if key in compared else None,
            "controls": controlled.get(key), "attribution": evidence.get(key)})
    return ordered(plan, cells)


def ordered(plan: Plan, cells: Mapping[str, CellRecord]) -> list[CellRecord]:
    """The plain cells in the plan's order, each followed by its control cells."""
    out: list[CellRecord] = []
    for c in plan.cells:
        if c.run.control is None:
            out.append(cells[c.key])
            out += [cells[k] for k, r in cells.items() if r.plain == c.key]
    return out + [r for r in cells.values() if r.control is not None and r.plain is None]
