"""The run summary JSON's cells (`perseval run --summary-json`), rendered from the record: one flat row per
cell with the names the summary has always had (`score`, `ci_low`, `n_users`, `delta_vs_baseline`, `judge_auc`,
`tokens_in`, ...), its label as `name`, and its controls and evidence attribution as the record types them.
`headline` holds the plain cells, `controls` the control cells."""
from __future__ import annotations

from typing import Any

from perseval.report.record import CellRecord, RunRecord


def summary_row(c: CellRecord) -> dict[str, Any]:
    e, s, d, p = c.estimate, c.status, c.difference, c.probe
    row: dict[str, Any] = {
        **c.parts.model_dump(), "name": c.label, "cell": c.name, "key": c.key, "metric": c.metric,
        "control": c.control, "role": c.role, "score": e.point, "ci_low": e.low, "ci_high": e.high,
        "n_users": e.users, "n": s.scored, "instances": s.instances, "status": s.word,
        "scored_share": s.scored_share, "unscored_items": s.unscored_items, "unscored_share": s.unscored_item_share,
        "invalid_outputs": s.invalid_outputs, "failed_outputs": s.failed_outputs,
        "failed_judgments": s.failed_judgments, "level": e.level, "weighting": e.weighting,
        "effective_users": e.effective_users, "se": e.se, "se_reason": e.se_reason, "interval_note": e.note,
        "uninterpretable_mean": e.uninterpretable_mean, "uninterpretable_reason": e.uninterpretable_reason,
        "baseline": c.baseline, "delta_vs_baseline": d.point if d else None, "delta_ci_low": d.low if d else None,
        "delta_ci_high": d.high if d else None, "delta_p": d.p_holm if d else None,
        "delta_paired": d.paired if d else None, "delta_n_users": d.users if d else None,
        "delta_effective_users": d.effective_users if d else None, "mde": d.mde if d else None,
        "mde_reason": d.mde_reason if d else None}
    if p is not None:
        row |= {"judge_auc": p.auc, "judge_auc_ci_low": p.auc_low, "judge_auc_ci_high": p.auc_high,
                "judge_auc_from": p.auc_from, "judge_pass_rate_gold": p.pass_rate_gold,
                "judge_pass_rate_bad": p.pass_rate_bad, "judge_discriminates": p.discriminates,
                "judge_flag": p.flag, "judge_probe_items": p.items, "judge_probe_gold": p.gold_items,
                "judge_probe_bad": p.bad_items, "judge_threshold": p.threshold}
    row |= c.cost.model_dump()
    row["controls"] = c.controls.model_dump() if c.controls else None
    row["attribution"] = c.attribution.model_dump() if c.attribution else None
    return row


def summary_cells(record: RunRecord) -> dict[str, list[dict[str, Any]]]:
    """{"headline": plain cells' rows, "controls": control cells' rows}, in the record's order."""
    return {"headline": [summary_row(c) for c in record.plain_cells()],
            "controls": [summary_row(c) for c in record.control_cells()]}
