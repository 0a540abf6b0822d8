"""How a record's numbers read, the same in every view: a score and its interval as `27.8 [9.6, 58.1]` (the two
ends, never "±": near 0 and 100 the user-clustered intervals are asymmetric by design), a difference signed,
`—` for a number that is not interpretable (its judge does not discriminate), `-` for one that does not exist
(nothing scored: never 0), p to two places, the status in one short word with what was left out."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from perseval.report.record import CellRecord, Gain

WITHHELD = "—"  # a number that exists but is not interpretable
MISSING = "-"  # a number that does not exist (nothing scored, no comparison)


def interval_text(low: Optional[float], high: Optional[float], signed: bool = False) -> str:
    """"[9.6, 58.1]" (signed: "[-5.0, +27.2]"); "" where either end is missing."""
    if low is None or high is None:
        return ""
    fmt = "+.1f" if signed else ".1f"
    return f"[{low:{fmt}}, {high:{fmt}}]"


def number_text(value: Optional[float], signed: bool = False) -> str:
    return MISSING if value is None else f"{value:{'+.1f' if signed else '.1f'}}"


def score_text(cell: CellRecord) -> str:
    """"27.8 [9.6, 58.1]": the score and its interval's two ends (the score alone where there is none); "—" for
    a cell that is not interpretable; "-" where nothing was scored."""
    if not cell.interpretable:
        return WITHHELD
    e = cell.estimate
    if e.point is None:
        return MISSING
    ci = interval_text(e.low, e.high)
    return f"{e.point:.1f}" + (f" {ci}" if ci else "")


def users_text(cell: CellRecord) -> str:
    """"4/8": the users the estimate rests on and the instances scored."""
    users = cell.estimate.users
    return f"{users if users is not None else MISSING}/{cell.status.scored}"


def delta_text(cell: CellRecord) -> str:
    """"+11.1 [-5.0, +27.2]": the difference to the baseline and its interval ("unpaired" when the two cells were
    not scored on the same instances); "baseline" on the baseline's own cell; "—" where not interpretable."""
    d = cell.difference
    if d is None:
        if cell.baseline is not None and cell.parts.agent == cell.baseline and cell.control is None:
            return "baseline"
        return WITHHELD if not cell.interpretable and cell.baseline else ""
    if d.point is None:
        return MISSING
    ci = interval_text(d.low, d.high, signed=True)
    return f"{d.point:+.1f}" + (f" {ci}" if ci else "") + ("" if d.paired else " unpaired")


def p_text(value: Optional[float]) -> str:
    if value is None:
        return ""
    return f"{value:.2f}" if value >= 0.01 else f"{value:.0e}"


def gain_text(gain: Optional[Gain]) -> str:
    """"+2.7 [-5.0, +9.1]" of a gain; "-" where there is none."""
    if gain is None or gain.point is None:
        return MISSING
    ci = interval_text(gain.low, gain.high, signed=True)
    return f"{gain.point:+.1f}" + (f" {ci}" if ci else "")


def judge_text(cell: CellRecord) -> str:
    """"0.50 ✗": the AUC of the cell's judge on answers of known verdict and whether it discriminates ("0.92 ✓
    t=0.81": and the threshold its probe chose, `threshold: calibrated`); "" where the judge was not probed."""
    check = cell.probe
    if check is None or check.discriminates is None:
        return ""
    auc = "n/a" if check.auc is None else f"{check.auc:.2f}"
    calibrated = f" t={check.threshold:.2f}" if check.threshold is not None else ""
    return f"{auc} {'✓' if check.discriminates else '✗'}{calibrated}"


# A cell's status in one short word (the legend under the table says what each means).
STATUS_WORDS = {"complete": "ok", "incomplete": "incompl", "no items": "no items", "partly scored": "partly",
                "unscored": "unscored"}
STATUS_LEGEND = {
    "ok": "complete (every instance judged has a score; no output or judgment failed)",
    "incompl": "incomplete (some outputs or judgments failed and are left out; the same command redoes them)",
    "no items": "the judge had nothing of this data to judge (n 0, no score)",
    "unscored": "no instance has a score (failed, unscored and zero are different facts)",
    "partly": "partly scored (some instances have no score; the share of instances scored beside it)",
    "fail out": "agent outputs that failed", "fail judg": "judgments that failed",
    "unsc": "items a judge left unscored (unreadable verdict), and their share of the items"}


def _left_out(cell: CellRecord, terse: bool) -> list[str]:
    """What a cell's score leaves out: failed outputs and judgments, unscored items with their share."""
    s = cell.status
    out_word, judg_word, unsc_word, share_fmt = ("fail out", "fail judg", "unsc", " {:.0f}%") if terse else \
        ("failed out", "failed judg", "unscored items", " ({:.0f}%)")
    parts = [f"{s.failed_outputs} {out_word}"] if s.failed_outputs else []
    parts += [f"{s.failed_judgments} {judg_word}"] if s.failed_judgments else []
    if s.unscored_items:
        share = s.unscored_item_share
        parts.append(f"{s.unscored_items} {unsc_word}" + (share_fmt.format(share) if share is not None else ""))
    return parts


def status_short(cell: CellRecord) -> str:
    """"ok", "incompl 2 fail out", "partly 75% 1 unsc 5%": the status word and what was left out, tersely."""
    s = cell.status
    word = STATUS_WORDS.get(s.word, s.word)
    if s.word == "partly scored" and s.scored_share is not None:
        word += f" {s.scored_share:.0f}%"
    return " ".join([word, *_left_out(cell, terse=True)])


def status_text(cell: CellRecord) -> str:
    """The status with what was left out, in words (the wide table)."""
    s = cell.status
    word = s.word + (f" ({s.scored_share:.0f}% of instances scored)" if s.word == "partly scored"
                     and s.scored_share is not None else "")
    return ", ".join([word, *_left_out(cell, terse=False), *([] if cell.interpretable else ["judge flagged"])])


def status_legend(cells: Iterable[CellRecord]) -> str:
    """What each status word shown means: only the words some cell shows."""
    shown = " ".join(status_short(c) for c in cells)
    words = [w for w in STATUS_LEGEND if f" {w}" in f" {shown}"]
    return "status: " + "; ".join(f"{w} = {STATUS_LEGEND[w]}" for w in words) if words else ""


def level_text(level: float) -> str:
    """A confidence level as run: 0.95 -> "95%", 0.9 -> "90%", 0.975 -> "97.5%"."""
    return f"{100 * level:g}%"


def value_text(value: Any) -> str:
    """A frame's value: counts as integers, other numbers to two places, missing as blank."""
    from numbers import Integral, Real

    if value is None or (isinstance(value, Real) and value != value):
        return ""
    if isinstance(value, bool) or not isinstance(value, Real):
        return str(value)
    if isinstance(value, Integral) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.2f}"
