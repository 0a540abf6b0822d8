"""Per cell: own-history, swapped-history and no-history scores and the gains between them.

personalization gain = own - swapped-history (is it THIS user's history that helps?), history gain =
own - no-history (does history help at all?). Both are paired over the instances the two cells share,
with intervals over users (perseval.metrics.uncertainty.paired_difference), in score points; the
reference's score and `<gain>_own` are means over those same instances, so own - reference = gain.
The gains' p-values are Holm-adjusted together (`<gain>_p_holm`; per metric: `p_holm`).

The no-history reference of an agent is an agent of the same benchmark entry that uses no history
(perseval.pipeline.controls.uses_history) but a backbone: of the same kind when there is one (iba-rag ->
iba-no-history, apeb-direct -> apeb-no-history, bespoke-raw-history -> bespoke-no-context), else the
one whose name says no-history / no-context. It is compared on the same backbone and judge.
An agent that uses no history has both gains 0 by construction (its output cannot depend on whose
history it is, nor on any): no swapped run is made for it, and the row says so.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import pandas as pd

from perseval.report.attribution import attribution_fields, evidence_recall, evidence_turns
from perseval.experiment.load import bound
from perseval.experiment.config import ResolvedExperiment
from perseval.pipeline.controls import SWAPPED_HISTORY, uses_history
from perseval.metrics.aggregate import per_instance, scores_frame
from perseval.metrics.ci_tables import cluster_of
from perseval.metrics.uncertainty import holm, paired_difference
from perseval.pipeline.plan import Cell, Plan
from perseval.core.instances import AgentOutput, Instance, InstanceScore
from perseval.pipeline.stages import load_documents, load_instances
from perseval.core.store import StageStore

NO_HISTORY_NOTE = "uses no history: gains 0 by construction"
NO_HISTORY_NAMES = ("no-history", "no-context")


def instance_values(root: str, cell: Cell) -> dict[str, float]:
    """Instance id -> the cell's headline metric (mean over repeats; NaN: unscored)."""
    store = StageStore(root, "score", cell.key)
    metric = store.manifest().get("headline_metric")
    records = store.read_records(InstanceScore) if store.parts() else []
    inst = per_instance(scores_frame(records))
    sub = inst[inst["metric"] == metric]
    return {str(i): float(v) for i, v in zip(sub["instance_id"], sub["value"])}


def _needs(exp: ResolvedExperiment, agent: str) -> frozenset[str]:
    return bound(exp).agents[agent].needs


def no_history_agent(exp: ResolvedExperiment, bench_index: int, agent: str) -> str | None:
    """The no-history reference of `agent` in its benchmark entry (see the module doc), or None."""
    entry = exp.experiment.benchmarks[bench_index]
    candidates = [a for a in entry.agents if a != agent and "llm" in _needs(exp, a) and not uses_history(_needs(exp, a))]
    same_kind = [a for a in candidates if exp.agents[a].kind == exp.agents[agent].kind]
    named = [a for a in candidates if any(n in a for n in NO_HISTORY_NAMES)]
    found = same_kind or named
    return found[0] if found else None


def _identity(cell: Cell) -> tuple[Any, ...]:
    return cell.bench_index, cell.agent, cell.backbone, cell.retriever, cell.judge


def _difference(root: str, a: Cell, b: Cell, users: dict[str, str], values: dict[str, dict[str, float]]) \
        -> tuple[float | None, float | None, Any]:
    """(a's mean, b's mean, a - b) over the instances both scored, so own - reference = gain exactly: a
    user whose instances one cell lost drops out of all three, not only of the gain."""
    va = values.setdefault(a.key, instance_values(root, a))
    vb = values.setdefault(b.key, instance_values(root, b))
    shared = sorted(i for i in set(va) & set(vb) if va[i] == va[i] and vb[i] == vb[i])
    if not shared:
        return None, None, None
    diff = paired_difference([va[i] for i in shared], [vb[i] for i in shared], [users[i] for i in shared])
    return _mean([va[i] for i in shared]), _mean([vb[i] for i in shared]), diff


def _mean(values: list[float]) -> float | None:
    kept = [v for v in values if v == v]
    return sum(kept) / len(kept) if kept else None


def _gain_fields(prefix: str, own: float | None, diff: Any) -> dict[str, Any]:
    if diff is None:
        return {}
    return {prefix: diff.mean, f"{prefix}_ci_low": diff.ci_low, f"{prefix}_ci_high": diff.ci_high,
            f"{prefix}_p": diff.p_value, f"{prefix}_n": diff.n, f"{prefix}_users": diff.n_users,
            f"{prefix}_own": own, f"{prefix}_small_n": diff.small_n}


GAIN_PREFIXES = ("personalization_gain", "history_gain")


def with_holm(out: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each gain's `<gain>_p_holm`: Holm-adjusted across every gain row of the plan (both kinds of gain,
    all cells), the family a reader scans for "which gains are real"."""
    keys = [(k, f) for k, fields in out.items() for f in GAIN_PREFIXES if fields.get(f"{f}_p") is not None]
    for (k, f), p in zip(keys, holm([out[k][f"{f}_p"] for k, f in keys])):
        out[k][f"{f}_p_holm"] = p
    return out


def control_fields(plan: Plan, root: str) -> dict[str, dict[str, Any]]:
    """Plain cell key -> its control fields: swapped_score, personalization_gain (+ interval),
    no_history_score, history_gain (+ interval), evidence recall and the score split, a note."""
    exp = plan.exp
    by_identity = {(_identity(c), c.run.control.name if c.run.control else None): c for c in plan.cells}
    values: dict[str, dict[str, float]] = {}
    data = {d.key: d for d in plan.data}
    users = {k: {i.instance_id: cluster_of(i) for i in _instances(root, k)} for k in data}
    out: dict[str, dict[str, Any]] = {}
    for cell in plan.cells:
        if cell.run.control is not None:
            continue
        entry = exp.experiment.benchmarks[cell.bench_index]
        controls = entry.controls if entry.controls is not None else exp.experiment.controls
        u = users[cell.run.data.key]
        fields: dict[str, Any] = {}
        if not uses_history(_needs(exp, cell.agent)):
            fields = {"controls_note": NO_HISTORY_NOTE, "personalization_gain": 0.0, "history_gain": 0.0} \
                if controls else {"controls_note": NO_HISTORY_NOTE, "history_gain": 0.0}
        else:
            swapped = by_identity.get((_identity(cell), SWAPPED_HISTORY))
            if swapped is not None:
                own, score, diff = _difference(root, cell, swapped, u, values)
                fields |= {"swapped_score": score, **_gain_fields("personalization_gain", own, diff)}
            ref = no_history_agent(exp, cell.bench_index, cell.agent)
            # the reference on the same retriever when it searches a corpus with it (bespoke-no-context), else none
            base = next((by_identity[k] for r in (cell.retriever, "-")
                         if (k := ((cell.bench_index, ref, cell.backbone, r, cell.judge), None)) in by_identity),
                        None) if ref else None
            if base is not None:
                own, score, diff = _difference(root, cell, base, u, values)
                fields |= {"no_history_agent": ref, "no_history_score": score,
                           **_gain_fields("history_gain", own, diff)}
        fields |= _attribution(root, cell, values)
        if fields:
            out[cell.key] = fields
    return with_holm(out)


def _attribution(root: str, cell: Cell, values: dict[str, dict[str, float]]) -> dict[str, Any]:
    evidence = _evidence(root, cell.run.data.key)
    if not evidence:
        return {}
    outputs = StageStore(root, "run", cell.run.key).read_records(AgentOutput)
    recall = evidence_recall(outputs, evidence)
    return attribution_fields(recall, values.setdefault(cell.key, instance_values(root, cell)))


@lru_cache(maxsize=8)
def _instances(root: str, dkey: str) -> tuple[Instance, ...]:
    return tuple(load_instances(root, dkey))


@lru_cache(maxsize=8)
def _evidence(root: str, dkey: str) -> dict[str, set[str]]:
    """Instance id -> its evidence doc ids (content-addressed data: safe to keep per process)."""
    return evidence_turns(_instances(root, dkey), load_documents(root, dkey))


# --- beside the headline ------------------------------------------------------------------------------------

ROW_IDENTITY = ("benchmark", "agent", "backbone", "retriever", "judge")


def _row_identity(cell: Cell) -> tuple[str, ...]:
    return cell.entry, cell.agent, cell.backbone or "-", cell.retriever, cell.judge


def with_controls(plan: Plan, root: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline rows with each plain cell's control fields added beside its score (matched by the
    row's identity columns); rows of cells with no control field are left as they are."""
    fields = control_fields(plan, root)
    by_identity = {_row_identity(c): fields[c.key] for c in plan.cells if c.key in fields}
    return [{**r, **by_identity.get(tuple(r[k] for k in ROW_IDENTITY), {})} for r in rows]


GAIN_METRICS = ("swapped_score", "personalization_gain", "personalization_gain_ci_low",
                "personalization_gain_ci_high", "no_history_score", "history_gain", "history_gain_ci_low",
                "history_gain_ci_high", "evidence_recall", "score_evidence_reached", "score_evidence_missed",
                "judge_auc", "judge_pass_rate_gold", "judge_pass_rate_bad", "judge_discriminates",
                "judge_threshold")  # + perseval.report.probes


def control_metrics(cell: Cell, rows: list[dict[str, Any]]) -> dict[str, float]:
    """The MLflow metrics of a cell's control fields (`controls.<field>`), from its headline row."""
    row = next((r for r in rows if tuple(r[k] for k in ROW_IDENTITY) == _row_identity(cell)), None)
    if row is None or cell.run.control is not None:
        return {}
    return {f"controls.{m}": float(row[m]) for m in GAIN_METRICS if isinstance(row.get(m), (int, float))}


CONTROL_COLUMNS = ("swapped_score", "personalization_gain", "no_history_score", "history_gain", "evidence_recall",
                   "controls_note")


def _num(v: Any) -> str:
    return "-" if v is None or v != v else f"{v:.1f}"


def _gain(r: dict[str, Any], prefix: str) -> str:
    if r.get(prefix) is None:
        return "-"
    lo, hi = r.get(f"{prefix}_ci_low"), r.get(f"{prefix}_ci_high")
    return _num(r[prefix]) + ("" if lo is None or hi is None else f" [{_num(lo)}, {_num(hi)}]")


def gain_text(r: dict[str, Any]) -> list[str]:
    """One row of the controls table as text (the CLI prints it under the headline)."""
    cell = "/".join(str(r[k]) for k in ROW_IDENTITY)
    split = "-" if "evidence_recall" not in r else \
        f"{_num(r.get('score_evidence_reached'))} (n={r.get('n_evidence_reached')}) / " \
        f"{_num(r.get('score_evidence_missed'))} (n={r.get('n_evidence_missed')})"
    pg = _gain(r, "personalization_gain") if "controls_note" not in r else r["controls_note"]
    return [cell, _num(r.get("score")), _num(r.get("swapped_score")), pg, _num(r.get("no_history_score")),
            _gain(r, "history_gain"), _num(r.get("evidence_recall")), split]


# --- per metric (Bespoke: recall should barely move under the swap, the E_p criteria should) ----------------

def metric_values(root: str, cell: Cell) -> dict[str, dict[str, float]]:
    """Metric -> instance id -> value (mean over repeats) of every metric a cell's score stage wrote."""
    store = StageStore(root, "score", cell.key)
    inst = per_instance(scores_frame(store.read_records(InstanceScore) if store.parts() else []))
    return {str(m): {str(i): float(v) for i, v in zip(g["instance_id"], g["value"])}
            for m, g in inst.groupby("metric")}


def gains_by_metric(plan: Plan, root: str) -> pd.DataFrame:
    """One row per (plain cell with a swapped-history run, metric): own, swapped, the paired gain and its
    user-resampled interval. Where one judge scores several metrics (Bespoke's recall and E_p criteria)
    this says which of them the user's history moves."""
    by_identity = {(_identity(c), c.run.control.name if c.run.control else None): c for c in plan.cells}
    rows = []
    for cell in plan.cells:
        swapped = by_identity.get((_identity(cell), SWAPPED_HISTORY)) if cell.run.control is None else None
        if swapped is None:
            continue
        users = {i.instance_id: cluster_of(i) for i in _instances(root, cell.run.data.key)}
        own, other = metric_values(root, cell), metric_values(root, swapped)
        for metric in sorted(set(own) & set(other)):
            shared = sorted(i for i in set(own[metric]) & set(other[metric])
                            if own[metric][i] == own[metric][i] and other[metric][i] == other[metric][i])
            if not shared:
                continue
            d = paired_difference([own[metric][i] for i in shared], [other[metric][i] for i in shared],
                                  [users[i] for i in shared])
            rows.append({"cell": cell.name, "metric": metric, "own": _mean([own[metric][i] for i in shared]),
                         "swapped": _mean([other[metric][i] for i in shared]), "gain": d.mean, "ci_low": d.ci_low,
                         "ci_high": d.ci_high, "p_value": d.p_value, "n": d.n, "users": d.n_users,
                         "small_n": d.small_n})
    frame = pd.DataFrame(rows)
    if not frame.empty:  # one family: every (cell, metric) gain the table shows
        frame["p_holm"] = holm(frame["p_value"].tolist())
    return frame


def log_control_tables(plan: Plan, root: str, rows: list[dict[str, Any]]) -> None:
    """Into the active (parent) MLflow run: controls/gains_by_metric and controls/cells (every control
    and evidence field of the headline rows), when the run has any."""
    from perseval.report.tracking import log_table

    by_metric = gains_by_metric(plan, root)
    if not by_metric.empty:
        log_table(by_metric.set_index(["cell", "metric"]), "gains_by_metric", "controls")
    cells = pd.DataFrame([r for r in rows if any(k in r for k in CONTROL_COLUMNS)])
    if not cells.empty:
        log_table(cells.set_index(list(ROW_IDENTITY)), "cells", "controls")
