"""Typed headline rows and score manifests (issue 30).

A `HeadlineRow` is one plain cell's line of the headline: its identity, score with interval and users, what was
left out, its difference to the baseline, then what later passes fill in - the cost of the cell
(perseval.pipeline.cost), the controls and evidence fields (perseval.report.gains, kept as `controls`: that pass
owns their names) and the judge's probe figures (perseval.report.probes). It reads as a mapping too
(`row["score"]`, `row.get("judge_auc")`, `{**row}`), with the same keys the summary JSON has always had: the
core fields always, a later pass's fields only when that pass filled them.

A `ScoreManifest` is what the score stage reports of one cell (perseval.pipeline.stages.score_summary): the
score table, its metrics and the count of outputs and judgments by status.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from perseval.metrics.aggregate import OVERALL

CORE = ("benchmark", "agent", "backbone", "retriever", "judge", "metric", "score", "n", "unscored_items",
        "unscored_share", "invalid_outputs", "failed_outputs", "failed_judgments", "status", "ci_low", "ci_high", "se",
        "n_users", "level", "baseline", "delta_vs_baseline", "delta_ci_low", "delta_ci_high", "delta_p",
        "delta_paired", "delta_n_users", "mde")
COST = ("tokens_in", "tokens_out", "llm_seconds", "wall_seconds", "cost_usd", "new_tokens_in", "new_tokens_out",
        "new_cost_usd")
PROBE = ("judge_auc", "judge_pass_rate_gold", "judge_pass_rate_bad", "judge_discriminates", "judge_flag",
         "judge_probe_items", "judge_probe_gold", "judge_probe_bad", "judge_auc_ci_low", "judge_auc_ci_high",
         "judge_auc_from", "judge_threshold")


PARTLY_SCORED = 0.5  # a cell with a smaller share of its instances scored is "partly scored", whatever its score
Number = (Real,)  # numpy's floats and ints too
Flag = (bool, np.bool_, type(None))
TYPES: dict[str, tuple[type, ...]] = {
    **{k: (str,) for k in ("benchmark", "agent", "backbone", "retriever", "judge", "metric", "status")},
    **{k: (Integral,) for k in ("n", "unscored_items", "invalid_outputs", "failed_outputs", "failed_judgments")},
    **{k: Number + (type(None),) for k in ("score", "unscored_share", "ci_low", "ci_high", "se", "n_users", "level",
                                          "delta_vs_baseline", "delta_ci_low", "delta_ci_high", "delta_p",
                                          "delta_n_users", "mde", *COST, "judge_auc", "judge_pass_rate_gold",
                                          "judge_pass_rate_bad", "judge_probe_items", "judge_probe_gold",
                                          "judge_probe_bad", "judge_auc_ci_low", "judge_auc_ci_high",
                                          "judge_threshold")},
    "judge_auc_from": (str, type(None)),
    # the estimate's effective users and estimand (issue 43): always filled now, absent from older summaries
    **{k: Number + (type(None),) for k in ("effective_users", "delta_effective_users")},
    "weighting": (str, type(None)), "interval_note": (str, type(None)),
    "scored_share": Number + (type(None),),
    "baseline": (str, type(None)), "delta_paired": Flag, "judge_discriminates": Flag,
    "judge_flag": (str, type(None)), "se_reason": (str, type(None)), "mde_reason": (str, type(None)),
}

NO_SPREAD = ("no variation between users: the interval is bounded by the 0-100 scale (one draw per user), not "
             "t x SE")


def spread(se: float | None, low: float | None, high: float | None) -> tuple[float | None, str | None]:
    """The SE an interval rests on, or None and why: an SE of 0 beside an interval of non-zero width (every
    user scored alike, so the interval comes from the scale's bound) would claim a precision the interval
    does not; an MDE computed from it would be 0 too."""
    if se is not None and se == 0 and low is not None and high is not None and high > low:
        return None, NO_SPREAD
    return se, None


class HeadlineRow(dict):  # type: ignore[type-arg]
    """One plain cell's headline row: a dict (so the summary JSON, pandas and `{**row}` read it as they always
    did) whose declared fields are checked when it is made and read as typed attributes (`row.score`); an
    optional field a pass did not fill reads None and is absent from the keys."""

    benchmark: str
    agent: str
    backbone: str
    retriever: str
    judge: str
    metric: str
    score: float | None  # None: nothing scored (never 0)
    n: int  # instances scored
    unscored_items: int
    unscored_share: float | None
    invalid_outputs: int
    failed_outputs: int
    failed_judgments: int
    scored_share: float | None  # percent of the cell's instances with a score (set when some were judged)
    status: str  # complete / partly scored / unscored / incomplete / no items (ScoreManifest.status)
    ci_low: float | None
    ci_high: float | None
    se: float | None
    n_users: int | None
    level: float
    baseline: str | None
    delta_vs_baseline: float | None
    delta_ci_low: float | None
    delta_ci_high: float | None
    delta_p: float | None  # Holm-corrected across the table's comparisons
    delta_paired: bool | None
    delta_n_users: int | None
    mde: float | None
    se_reason: str | None  # why se is None though the interval has a width (rows.spread)
    mde_reason: str | None
    effective_users: float | None  # Kish's effective users of the score's weights (perseval.metrics.uncertainty)
    weighting: str | None  # the score's estimand: "instance" (mean over instances) or "user" (mean of users' means)
    interval_note: str | None  # why the score's interval is withheld
    delta_effective_users: float | None
    # the cost pass (headline_rows given costs)
    tokens_in: int | None
    tokens_out: int | None
    llm_seconds: float | None
    wall_seconds: float | None
    cost_usd: float | None
    new_tokens_in: int | None
    new_tokens_out: int | None
    new_cost_usd: float | None
    # the probes pass (perseval.report.probes.with_probe_flags)
    judge_auc: float | None
    judge_pass_rate_gold: float | None
    judge_pass_rate_bad: float | None
    judge_discriminates: bool | None
    judge_flag: str | None
    judge_probe_items: int | None
    judge_probe_gold: int | None
    judge_probe_bad: int | None
    judge_auc_ci_low: float | None  # DeLong's 95% interval of judge_auc, probe items as the unit
    judge_auc_ci_high: float | None
    judge_auc_from: str | None  # p_true: AUC of the verdict probabilities; verdict: of the 0/1 verdicts
    judge_threshold: float | None  # `threshold: calibrated`: the P(true) cut its probe chose (else absent)

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "HeadlineRow":
        """A row from the mapping a pass returns (or the summary JSON holds): every core field present, every
        declared field of its type (TypeError naming it otherwise); the controls pass's own fields kept."""
        if isinstance(row, HeadlineRow):
            return row
        missing = [k for k in CORE if k not in row]
        if missing:
            raise TypeError(f"a headline row lacks {missing}")
        for key, value in row.items():
            if key in TYPES and not isinstance(value, TYPES[key]):
                raise TypeError(f"headline row field {key!r} is {value!r}, not {' or '.join(t.__name__ for t in TYPES[key])}")
        return cls(row)

    def filled(self, **fields: Any) -> "HeadlineRow":
        """A copy with a later pass's fields (None: left out of the keys)."""
        return HeadlineRow.of({**self, **{k: v for k, v in fields.items() if v is not None}})

    def __getattr__(self, name: str) -> Any:
        if name in TYPES:
            return self.get(name)
        raise AttributeError(name)

    @property
    def controls(self) -> dict[str, Any]:
        """The controls pass's fields (perseval.report.gains names them)."""
        return {k: v for k, v in self.items() if k not in TYPES}

    def identity(self) -> tuple[str, str, str, str, str]:
        return self.benchmark, self.agent, self.backbone, self.retriever, self.judge

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


def without_score(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Benchmark entry (as the rows name it) -> the statuses of its cells, for each entry none of whose cells
    has a score: a benchmark that produced no number (every verdict unreadable, nothing to judge, all failed)."""
    by_entry: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_entry.setdefault(str(r["benchmark"]), []).append(r)
    return {entry: sorted({str(r["status"]) for r in members}) for entry, members in by_entry.items()
            if all(r.get("score") is None for r in members)}


@dataclass
class ScoreManifest:
    """What the score stage reports of one cell."""

    table: list[dict[str, Any]]
    headline_metric: str
    metrics: list[str]
    outputs: dict[str, int]  # agent outputs by status (ok / invalid / failed)
    judgments: dict[str, int]  # judgments by status (scored / unscored / failed)

    @classmethod
    def of(cls, summary: Mapping[str, Any] | "ScoreManifest") -> "ScoreManifest":
        if isinstance(summary, ScoreManifest):
            return summary
        return cls(list(summary.get("table", [])), str(summary.get("headline_metric", "")),
                   list(summary.get("metrics", [])), dict(summary.get("outputs", {})),
                   dict(summary.get("judgments", {})))

    @property
    def complete(self) -> bool:
        """No agent output and no judgment of the cell failed (a re-run redoes those)."""
        return not self.outputs.get("failed", 0) and not self.judgments.get("failed", 0)

    @property
    def scored_share(self) -> float | None:
        """The share (0-1) of the cell's instances with a score: from the overall row of its table (n instances
        judged, of which unscored_instances have no score), else from its judgments; None when nothing counts."""
        overall = next((r for r in self.table if r.get("group") == OVERALL), None)
        if overall is not None and overall.get("n") is not None:
            unscored = float(overall.get("unscored_instances") or 0)
            scored = float(overall.get("n") or 0) - unscored
        else:
            scored, unscored = self.judgments.get("scored", 0), self.judgments.get("unscored", 0)
        return scored / (scored + unscored) if scored + unscored else None

    @property
    def status(self) -> str:
        """"no items": the judge had nothing of the data to judge; "incomplete": some output or judgment
        failed (a re-run redoes it); "unscored": judged, but no instance got a score (every verdict unreadable);
        "partly scored": fewer than PARTLY_SCORED of its instances have a score; else "complete". Never
        "complete" with n 0."""
        if not sum(self.judgments.values()) and not self.outputs.get("failed", 0):
            return "no items"
        if not self.complete:
            return "incomplete"
        share = self.scored_share
        if not share:
            return "unscored"
        return "partly scored" if share < PARTLY_SCORED else "complete"
