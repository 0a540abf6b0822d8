"""The headline as a person reads it: one compact table per benchmark (cell, score [CI], users/n, Δ vs baseline
[CI] and p, the judge's AUC where its answers of known verdict were judged, a short status word) that fits the
terminal (perseval.report.views.fit: at narrower widths the same figures in two tables), the note that explains
only what is shown, and `--wide`: every column in one table. Rendered from the run record's cells: a control
cell (`lamp-rag [swapped-history]`) under its plain cell, with its own score; its gains are in the Controls
tables."""
from __future__ import annotations

from typing import Sequence

from rich.table import Table
from rich.text import Text

from perseval.report.record import CellRecord
from perseval.report.views.fit import Group, fitted
from perseval.report.views.text import (delta_text, judge_text, level_text, p_text, score_text, status_legend,
                                        status_short, status_text, users_text)



def discrimination_rule() -> str:
    """What a judge must show on the probes to discriminate (perseval.pipeline.probes)."""
    from perseval.pipeline.probes import CHANCE_AUC, DISCRIMINATION_AUC, PASSES_EVERYTHING

    return (f"AUC >= {DISCRIMINATION_AUC}, its interval above {CHANCE_AUC} and < {100 * PASSES_EVERYTHING:.0f}% of "
            "known-bad items passed")


def _by_judge(cells: Sequence[CellRecord]) -> list[CellRecord]:
    """The cells of one judge together, in the plan's order of judges (stable within a judge)."""
    judges = list(dict.fromkeys(c.parts.judge for c in cells))
    return sorted(cells, key=lambda c: judges.index(c.parts.judge))


def benchmark_tables(bench: str, cells: Sequence[CellRecord], width: int) -> list[Table]:
    cells = _by_judge(cells)
    metrics = ", ".join(sorted({c.metric for c in cells}))
    baseline = next((c.baseline for c in cells if c.baseline), None)
    groups = [Group(f"{metrics} (0-100)", ["score [CI]", "users/n"], [[score_text(c), users_text(c)] for c in cells])]
    if baseline:
        groups.append(Group(f"Δ vs baseline {baseline} [CI], p", ["Δ [CI]", "p"],
                            [[delta_text(c), p_text(c.difference.p_holm if c.difference else None)] for c in cells]))
    if any(judge_text(c) for c in cells):
        groups.append(Group("judge AUC", ["AUC"], [[judge_text(c)] for c in cells]))
    groups.append(Group("status", ["status"], [[status_short(c)] for c in cells], left=True))
    ends = [k + 1 < len(cells) and cells[k + 1].parts.judge != c.parts.judge for k, c in enumerate(cells)]
    title = f"{bench}: {metrics} (0-100)" + (f", Δ vs baseline {baseline}" if baseline else "")
    return fitted(title, "cell", [c.label for c in cells], groups, width, ends, part_title=bench)


def headline_tables(cells: Sequence[CellRecord], width: int) -> list[Table]:
    """The compact headline: per benchmark, its cells, each control cell under its plain cell."""
    benches: dict[str, list[CellRecord]] = {}
    for c in cells:
        benches.setdefault(c.parts.benchmark, []).append(c)
    return [t for bench, members in benches.items() for t in benchmark_tables(bench, members, width)]


UNEVEN = 0.2  # effective users this far below the users: shown (--wide) beside them


def uneven_users(cell: CellRecord) -> bool:
    """Effective users (Kish's) differ from the users by more than UNEVEN of them."""
    eff, users = cell.estimate.effective_users, cell.estimate.users
    return eff is not None and bool(users) and abs(users - eff) > UNEVEN * users


def wide_table(cells: Sequence[CellRecord]) -> Table:
    """Every column of the headline (what `--wide` prints), one row per cell."""
    uneven, compared = any(uneven_users(c) for c in cells), any(c.baseline for c in cells)
    probed = any(judge_text(c) for c in cells)
    labels = ["benchmark", "agent", "backbone", "retriever", "judge", "metric", "score [CI]", "users",
              *(["eff. users"] if uneven else []), "n", "judged", "unscored items", "invalid", "failed out",
              "failed judg", *(["Δ vs baseline [CI]", "p (Holm)", "MDE"] if compared else []),
              *(["judge AUC"] if probed else []), "status"]
    table = Table(title="Headline scores (0-100)", title_justify="left")
    for label in labels:
        table.add_column(label, justify="left" if label in ("benchmark", "agent", "backbone", "retriever", "judge",
                                                            "metric", "status") else "right")
    for c in cells:
        s, e, d = c.status, c.estimate, c.difference
        unscored = f"{s.unscored_items}" + (f" ({s.unscored_item_share:.0f}%)" if s.unscored_item_share is not None
                                            else "")
        agent = c.parts.agent + (f" [{c.control}]" if c.control else "")
        row = [c.parts.benchmark, agent, c.parts.backbone, c.parts.retriever, c.parts.judge, c.metric, score_text(c), "" if e.users is None else str(e.users),
               *([f"{e.effective_users:.1f}" if e.effective_users is not None else ""] if uneven else []),
               str(s.scored), str(s.instances), unscored, str(s.invalid_outputs), str(s.failed_outputs),
               str(s.failed_judgments)]
        if compared:
            row += [delta_text(c), p_text(d.p_holm if d else None),
                    f"{d.mde:.1f}" if d is not None and d.mde is not None else ""]
        row += [judge_text(c)] if probed else []
        table.add_row(*map(Text, (*row, status_text(c))))
    return table


def headline_note(cells: Sequence[CellRecord], wide: bool = False) -> str:
    """How to read the headline (printed under the tables): only the columns and status words it shows."""
    cells = [c for c in cells if c.control is None]
    levels = sorted({level_text(c.estimate.level) for c in cells}) or ["95%"]
    note = (f"[CI]: the two ends of the {' / '.join(levels)} user-clustered interval of the score (asymmetric "
            "near 0 and 100); users/n: the users it rests on and the instances scored.")
    if any(c.estimate.weighting == "user" for c in cells):
        note += " Where statistics.weighting is user, a score is the mean of its users' means."
    if withheld := [c for c in cells if c.estimate.note and c.interpretable]:
        note += f" {len(withheld)} score(s) without an interval: {withheld[0].estimate.note}."
    tests = sum(c.difference is not None and c.difference.p_holm is not None for c in cells)
    if any(c.baseline for c in cells):
        note += (" Δ: difference to the benchmark's baseline agent over the instances both cells scored, with its "
                 f"paired user-clustered interval; p: sign-flip test over users, Holm-corrected across the {tests} "
                 "comparison(s) of interpretable cells.")
        if wide:
            note += (" MDE: the smallest difference detectable (80% power, α 0.05) with this many users - a smaller "
                     "Δ is no evidence either way; blank where the users' differences do not vary (no SE).")
        few = min((c.difference.users for c in cells if c.difference and c.difference.users is not None),
                  default=None)
        if few is not None and few < 6:
            note += (f" With {few} user{'s' if few != 1 else ''} no sign-flip p can be below {2 / 2 ** few:.3g} (2 "
                     f"of the 2^{few} sign patterns are as extreme as any result): add users.")
    if any(judge_text(c) for c in cells):
        note += (" AUC: of the cell's judge, on answers of known verdict (judge_probes); ✓ it discriminates "
                 f"({discrimination_rule()}), ✗ it does not: that cell's score, Δ and p are not interpretable and "
                 "show —.")
    if not wide and (legend := status_legend(cells)):
        note += " " + legend + "."
    return note
