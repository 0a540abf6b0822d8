"""What the score stage reports of one cell (perseval.pipeline.stages.score_summary), read typed: its score table,
its metrics, its outputs and judgments by status, and the status word the cell gets from them.

Statuses count instances, not items: a cell is `complete` only when no output or judgment failed and every
instance its judge judged has a score. One item left unscored in an instance of twenty items can cost the
instance its score (Bespoke's recall reads every claim), and then the cell is `partly scored`, with its share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from perseval.metrics.aggregate import OVERALL

NO_SPREAD = ("no variation between users: the interval is bounded by the 0-100 scale (one draw per user), not "
             "t x SE")


def spread(se: float | None, low: float | None, high: float | None) -> tuple[float | None, str | None]:
    """The SE an interval rests on, or None and why: an SE of 0 beside an interval of non-zero width (every
    user scored alike, so the interval comes from the scale's bound) would claim a precision the interval
    does not; an MDE computed from it would be 0 too."""
    if se is not None and se == 0 and low is not None and high is not None and high > low:
        return None, NO_SPREAD
    return se, None


def number(value: Any) -> float | None:
    """A table's number: None where it is missing (pandas reads a missing one as NaN)."""
    return None if value is None or value != value else float(value)


def whole(value: Any) -> int | None:
    return None if value is None or value != value else int(value)


def text(value: Any) -> str | None:
    """A table's text cell: None where it is empty (pandas reads a missing one as NaN)."""
    return value if isinstance(value, str) and value else None


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
    def overall(self) -> dict[str, Any]:
        """The Overall row of the score table ({} when nothing was scored)."""
        return next((dict(r) for r in self.table if r.get("group") == OVERALL), {})

    @property
    def complete(self) -> bool:
        """No agent output and no judgment of the cell failed (a re-run redoes those)."""
        return not self.outputs.get("failed", 0) and not self.judgments.get("failed", 0)

    @property
    def judged(self) -> int:
        """Instances the judge judged: those of the table, else those of its judgments."""
        overall = self.overall
        if overall.get("n") is not None:
            return whole(overall.get("n")) or 0
        return self.judgments.get("scored", 0) + self.judgments.get("unscored", 0)

    @property
    def scored(self) -> int:
        """Of the judged instances, those with a score."""
        overall = self.overall
        if overall.get("n") is not None:
            return (whole(overall.get("n")) or 0) - (whole(overall.get("unscored_instances")) or 0)
        return self.judgments.get("scored", 0)

    @property
    def scored_share(self) -> float | None:
        """The share (0-1) of the judged instances with a score; None when nothing was judged."""
        return self.scored / self.judged if self.judged else None

    @property
    def status(self) -> str:
        """"no items": the judge had nothing of the data to judge; "incomplete": some output or judgment
        failed (a re-run redoes it); "unscored": judged, but no instance got a score (every verdict unreadable);
        "partly scored": some judged instance has no score; else "complete". Never "complete" with n 0."""
        if not sum(self.judgments.values()) and not self.outputs.get("failed", 0):
            return "no items"
        if not self.complete:
            return "incomplete"
        share = self.scored_share
        if not share:
            return "unscored"
        return "partly scored" if share < 1 else "complete"
