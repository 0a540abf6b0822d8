"""The probe check of each judge (judge_probes): its AUC on answers of known verdict, its pass rates with their
counts, and what that means for the cells it scored; one line per probed judge, from the record's cells."""
from __future__ import annotations

from typing import Optional, Sequence

from perseval.report.record import CellRecord
from perseval.report.words import NOT_INTERPRETABLE
from perseval.report.views.headline import discrimination_rule


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0f}%"


def probe_lines(cells: Sequence[CellRecord]) -> list[str]:
    """One line per (benchmark, judge) whose judge was probed, in the cells' order."""
    seen: dict[str, str] = {}
    for c in cells:
        check = c.probe
        judge = f"{c.parts.benchmark}/{c.parts.judge}"
        if check is None or check.discriminates is None or judge in seen:
            continue
        auc = "undefined" if check.auc is None else f"{check.auc:.2f}"
        if check.auc_low is not None and check.auc_high is not None:
            auc += f" [{check.auc_low:.2f}, {check.auc_high:.2f}] from {check.auc_from}"
        verdict = "discriminates" if check.discriminates else check.flag or NOT_INTERPRETABLE
        calibrated = f"calibrated threshold t={check.threshold:.2f}, pass rates cross-fitted by probe instance; " \
            if check.threshold is not None else ""
        seen[judge] = (f"{judge}: AUC {auc} on {check.items} probe items of known verdict; {calibrated}passes "
                       f"{_pct(check.pass_rate_gold)} of {check.gold_items} gold and {_pct(check.pass_rate_bad)} of "
                       f"{check.bad_items} known-bad items: {verdict} ({discrimination_rule()} needed)")
    return list(seen.values())


def flagged_judges(cells: Sequence[CellRecord]) -> list[str]:
    return sorted({f"{c.parts.benchmark}/{c.parts.judge}" for c in cells if not c.interpretable})


def flag_tags(cells: Sequence[CellRecord]) -> dict[str, str]:
    """The MLflow tags of a run whose judges were probed: the flag, naming the judges, when one fails."""
    flagged = flagged_judges(cells)
    return {"perseval.judge_flag": f"{NOT_INTERPRETABLE} ({', '.join(flagged)})"} if flagged else {}
