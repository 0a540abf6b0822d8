"""The headline as a person reads it in a terminal: a compact table that fits 100 columns without wrapping (cell,
score [CI], users/n, Δ vs baseline [CI] and p, the judge's AUC where its answers of known verdict were judged,
a short status word), at narrower widths the same figures in two tables per benchmark (scores, then the
differences to the baseline); the wide one with every column (`--wide`; the summary JSON and the Markdown
artifact keep every field too), the controls table when controls ran, and the cost table.

Every interval is printed as its two ends, `[low, high]`: near 0 and 100 the user-clustered intervals are
asymmetric by design, so a symmetric "±" would misstate them exactly where personalization scores live.

A cell is named by the fewest of its parts that tell it apart within its benchmark: the agent alone when
only one cell has it, else the agent and the judge (then the backbone, then the retriever) - `iba-rag` vs
`iba-no-history` vs `iba-oracle`, or `iba-rag/smollm2-judge` vs `iba-rag/iba.slots`.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable, Mapping, Sequence

from rich import box
from rich.markup import escape
from rich.table import Table

IDENTITY = ("benchmark", "agent", "backbone", "retriever", "judge")
EXTRA_PARTS = ("judge", "backbone", "retriever")  # tried in this order after the agent
COMPACT_WIDTH = 100  # the one-table headline from this many columns; below, scores and differences apart

Row = Mapping[str, Any]


def interval_text(low: Any, high: Any, signed: bool = False) -> str:
    """"[9.6, 58.1]" (signed: "[-5.0, +27.2]"); "" where either end is missing."""
    if low is None or high is None or low != low or high != high:
        return ""
    fmt = "+.1f" if signed else ".1f"
    return f"[{low:{fmt}}, {high:{fmt}}]"


def score_text(row: Row) -> str:
    """"27.8 [9.6, 58.1]": the score and its interval's two ends (the score alone where there is none); "—" for
    a score whose judge does not discriminate (its AUC stands beside it; the number stays in the record)."""
    if row.get("score") is None or row["score"] != row["score"]:
        return ""
    if row.get("judge_discriminates") is False:
        return "—"
    ci = interval_text(row.get("ci_low"), row.get("ci_high"))
    return f"{row['score']:.1f}" + (f" {ci}" if ci else "")


def delta_text(row: Row) -> str:
    """"+11.1 [-5.0, +27.2]": the difference to the baseline and its interval; "(unpaired)" when the two
    cells were not scored on the same instances; "baseline" on the baseline's own cell."""
    if row.get("delta_vs_baseline") is None:
        return "baseline" if row.get("baseline") == row.get("agent") else ""
    ci = interval_text(row.get("delta_ci_low"), row.get("delta_ci_high"), signed=True)
    text = f"{row['delta_vs_baseline']:+.1f}" + (f" {ci}" if ci else "")
    return text if row.get("delta_paired") else text + " (unpaired)"


def identity(row: Row) -> tuple[str, ...]:
    return tuple(str(row.get(k) or "-") for k in IDENTITY)


def short_names(identities: Sequence[Sequence[str]]) -> list[str]:
    """Per identity (benchmark, agent, backbone, retriever, judge): the shortest unambiguous name within its
    benchmark, the agent first ("iba-rag", "iba-rag/iba.slots")."""
    by_bench: dict[str, list[int]] = {}
    for k, ident in enumerate(identities):
        by_bench.setdefault(ident[0], []).append(k)
    names = [""] * len(identities)
    for members in by_bench.values():
        parts = _distinguishing([identities[k] for k in members])
        for k in members:
            names[k] = "/".join(identities[k][IDENTITY.index(p)] for p in ("agent", *parts))
    return names


def _distinguishing(group: list[Sequence[str]]) -> tuple[str, ...]:
    """The fewest extra parts (after the agent) that make the group's names distinct."""
    for size in range(len(EXTRA_PARTS) + 1):
        for parts in combinations(EXTRA_PARTS, size):
            cols = [IDENTITY.index(p) for p in ("agent", *parts)]
            if len({tuple(ident[c] for c in cols) for ident in group}) == len(group):
                return tuple(sorted(parts, key=EXTRA_PARTS.index))
    return EXTRA_PARTS


def p_text(value: Any) -> str:
    if value is None or value != value:
        return ""
    return f"{value:.2f}" if value >= 0.01 else f"{value:.0e}"


# A cell's status in one short word (the legend under the table says what each means); a status this table
# does not know (a later pass's word) is printed as the row carries it.
STATUS_WORDS = {"complete": "ok", "incomplete": "incompl", "no items": "no items", "partly scored": "partly"}
STATUS_LEGEND = {
    "ok": "complete (every output and judgment in)",
    "incompl": "incomplete (some outputs or judgments failed and are left out; the same command redoes them)",
    "no items": "the judge had nothing of this data to judge (n 0, no score)",
    "unscored": "no instance has a score (failed, unscored and zero are different facts)",
    "partly": "partly scored (under half of the instances scored; the share beside it)",
    "fail out": "agent outputs that failed", "fail judg": "judgments that failed",
    "unsc": "items a judge left unscored (unreadable verdict), their share"}


def status_text(row: Row) -> str:
    """The cell's status with what was left out: failed outputs and judgments, unscored items (the words of
    the wide table and Markdown)."""
    parts = [str(row.get("status") or "")]
    if parts[0] == "partly scored" and row.get("scored_share") is not None:  # the share of instances scored
        parts[0] += f" ({row['scored_share']:.0f}% scored)"
    failed_out, failed_judg = row.get("failed_outputs") or 0, row.get("failed_judgments") or 0
    if failed_out:
        parts.append(f"{failed_out} failed out")
    if failed_judg:
        parts.append(f"{failed_judg} failed judg")
    if row.get("unscored_items"):
        share = row.get("unscored_share")
        parts.append(f"{row['unscored_items']} unscored" + (f" ({share:.0f}%)" if share is not None else ""))
    if row.get("judge_flag"):
        parts.append("judge flagged")
    return ", ".join(p for p in parts if p)


def status_short(row: Row) -> str:
    """"ok", "incompl 2 fail out", "ok 3 unsc 9%": the status word and what was left out, tersely (legend:
    STATUS_LEGEND)."""
    status = str(row.get("status") or "")
    parts = [STATUS_WORDS.get(status, status)]
    if status == "partly scored" and row.get("scored_share") is not None:  # the share of instances scored
        parts[0] += f" {row['scored_share']:.0f}%"
    if row.get("failed_outputs"):
        parts.append(f"{row['failed_outputs']} fail out")
    if row.get("failed_judgments"):
        parts.append(f"{row['failed_judgments']} fail judg")
    if row.get("unscored_items"):
        share = row.get("unscored_share")
        parts.append(f"{row['unscored_items']} unsc" + (f" {share:.0f}%" if share is not None else ""))
    return " ".join(p for p in parts if p)


def status_legend(rows: Sequence[Row]) -> str:
    """What each status word shown means: only the words some row shows."""
    shown = " ".join(status_short(r) for r in rows)
    words = [w for w in STATUS_LEGEND if f" {w}" in f" {shown}"]
    return "status: " + "; ".join(f"{w} = {STATUS_LEGEND[w]}" for w in words) if words else ""


def judge_text(row: Row) -> str:
    """"0.50 ✗": the AUC of the cell's judge on answers of known verdict (judge_probes) and whether it
    discriminates ("0.92 ✓ t=0.81": and the threshold its probe chose, `threshold: calibrated`); "" where the
    judge was not probed."""
    if row.get("judge_discriminates") is None:
        return ""
    auc = "n/a" if row.get("judge_auc") is None else f"{row['judge_auc']:.2f}"
    calibrated = f" t={row['judge_threshold']:.2f}" if row.get("judge_threshold") is not None else ""
    return f"{auc} {'✓' if row['judge_discriminates'] else '✗'}{calibrated}"


def delta_compact(row: Row) -> str:
    """"+11.1 [-5.0, +27.2]" (with "unpaired" where the cells were not scored on the same instances)."""
    return delta_text(row).replace(" (unpaired)", " unpaired")


def headline_tables(rows: Sequence[Row], width: int = COMPACT_WIDTH) -> list[Table]:
    """The compact headline, one table per benchmark, the cells of one judge together. A benchmark whose one
    table would be wider than `width` gets two: its scores, then its differences to the baseline (so at 80
    columns nothing wraps or is cut)."""
    names = short_names([identity(r) for r in rows])
    benches: dict[str, list[tuple[Row, str]]] = {}
    for r, name in zip(rows, names):
        benches.setdefault(str(r.get("benchmark")), []).append((r, name))
    tables: list[Table] = []
    for bench, members in benches.items():
        whole = [_bench_table(bench, members, ("score", "delta", "judge", "status"), gap) for gap in (1, 0)]
        fits = [t for t in whole if _natural_width(t) <= width]
        if fits:  # two spaces between columns where they fit, else one (the box's column divider)
            tables.append(fits[0])
            continue
        tables.append(_bench_table(bench, members, ("score", "judge", "status")))
        if any(r.get("baseline") for r, _ in members):
            tables.append(_bench_table(bench, members, ("delta",)))
    return tables


def _natural_width(table: Table) -> int:
    """The columns `table` takes when nothing is wrapped or cut."""
    from rich.console import Console

    return Console(width=1000).measure(table).maximum


def _bench_table(bench: str, members: list[tuple[Row, str]], parts: tuple[str, ...], gap: int = 1) -> Table:
    metrics = sorted({str(r.get("metric")) for r, _ in members})
    baseline = next((r.get("baseline") for r, _ in members if r.get("baseline")), None)
    delta = baseline is not None and "delta" in parts
    probed = "judge" in parts and any(judge_text(r) for r, _ in members)
    if parts == ("delta",):
        title = f"{bench}: Δ vs baseline {baseline} [CI], p"
    else:
        title = f"{bench}: {', '.join(metrics)} (0-100)" + (f", Δ vs baseline {baseline}" if delta else "")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  padding=(0, 0, 0, gap))
    table.add_column("cell", no_wrap=True)
    if "score" in parts:
        table.add_column("score [CI]", justify="right", no_wrap=True)
        table.add_column("users/n", justify="right", no_wrap=True)
    if delta:
        table.add_column("Δ [CI]", justify="right", no_wrap=True)
        table.add_column("p", justify="right", no_wrap=True)
    if probed:
        table.add_column("AUC", justify="right", no_wrap=True)
    if "status" in parts:
        table.add_column("status", no_wrap=True)
    judges = list(dict.fromkeys(str(r.get("judge")) for r, _ in members))  # in the plan's order
    members = sorted(members, key=lambda m: judges.index(str(m[0].get("judge"))))  # stable within a judge
    for k, (r, name) in enumerate(members):
        cells = [name]
        if "score" in parts:
            cells += [score_text(r) or "-", f"{r.get('n_users') if r.get('n_users') is not None else '-'}/{r.get('n') or 0}"]
        if delta:
            cells += [delta_compact(r), p_text(r.get("delta_p"))]
        if probed:
            cells.append(judge_text(r))
        if "status" in parts:
            cells.append(status_short(r))
        last = k + 1 < len(members) and members[k + 1][0].get("judge") != r.get("judge")
        table.add_row(*cells, end_section=last)
    return table


WIDE_COLUMNS = {"benchmark": "benchmark", "agent": "agent", "backbone": "backbone", "retriever": "retriever",
                "judge": "judge", "metric": "metric", "score": "score [CI]", "n_users": "users", "n": "n",
                "unscored_items": "unscored", "invalid_outputs": "invalid", "failed_outputs": "failed out",
                "failed_judgments": "failed judg"}
LEFT = {"benchmark", "agent", "backbone", "retriever", "judge", "metric", "status"}


def wide_table(rows: Sequence[Row]) -> Table:
    """Every column of the headline (what `--wide` prints)."""

    cols, uneven = {}, any(uneven_users(r) for r in rows)
    for column, label in WIDE_COLUMNS.items():
        cols[column] = label
        if column == "n_users" and uneven:  # a few users hold most instances somewhere: say how few count
            cols["effective_users"] = "eff. users"
    if any(r.get("baseline") for r in rows):
        cols |= {"delta": "Δ vs baseline [CI]", "delta_p": "p (Holm)", "mde": "MDE"}
    if any(judge_text(r) for r in rows):
        cols["judge_auc"] = "judge AUC"
    cols["status"] = "status"
    text = {"score": score_text, "delta": delta_text, "judge_auc": judge_text}
    table = Table(title="Headline scores (0-100)", title_justify="left")
    for key, label in cols.items():
        table.add_column(label, justify="left" if key in LEFT else "right")
    for r in rows:
        table.add_row(*[text[c](r) if c in text else _cell_text(c, r) for c in cols])
    return table


UNEVEN = 0.2  # effective users this far below the users: shown (--wide) beside them


def uneven_users(row: Row) -> bool:
    """Effective users (Kish's) differ from the users by more than UNEVEN of them."""
    eff, users = row.get("effective_users"), row.get("n_users")
    return eff is not None and bool(users) and abs(users - eff) > UNEVEN * users


def _cell_text(column: str, row: Row) -> str:
    value = row.get(column)
    if column == "effective_users" and value is not None:
        return f"{value:.1f}"
    if column == "delta_p" and value is not None:
        return p_text(value)
    if column == "mde" and value is not None:
        return f"{value:.1f}"
    if column == "unscored_items" and row.get("unscored_share") is not None:
        return f"{value} ({row['unscored_share']:.0f}%)"  # items a judge left unscored, and their share
    return "" if value is None else str(value)


def controls_ran(rows: Iterable[Row]) -> bool:
    """Whether a control run (the swapped-history one) is behind any row."""
    return any(r.get("swapped_score") is not None for r in rows)


def controls_table(rows: Sequence[Row], wide: bool = False) -> Table | None:
    """Beside each score, what it means (perseval.report.gains): own vs swapped-history vs no-history, the gains
    with their user-resampled 95% intervals, and how much gold evidence reached the context. Compact: only when
    controls ran; wide: whenever any row has a control or evidence field."""
    from perseval.report.gains import CONTROL_COLUMNS, gain_text

    if not wide and not controls_ran(rows):
        return None
    shown = [r for r in rows if any(r.get(k) is not None for k in CONTROL_COLUMNS)]
    if not shown:
        return None
    names = dict(zip(map(identity, rows), short_names([identity(r) for r in rows])))
    table = Table(title="Controls: personalization gain = own - swapped history; history gain = own - no history",
                  title_justify="left")
    for label in ["cell", "score", "swapped", "personalization gain [95% CI]", "no history", "history gain [95% CI]",
                  "evidence recall", "score: evidence in / missed"]:
        table.add_column(label, justify="left" if label == "cell" else "right", no_wrap=label == "cell")
    for r in shown:
        cells = gain_text(dict(r))
        cells[0] = cells[0] if wide else f"{r.get('benchmark')}/{names[identity(r)]}"
        table.add_row(*cells)
    return table


def cost_table(rows: Sequence[Row]) -> Table:
    """What each cell cost: in total (cached answers at their original usage) and spent by this run. A run
    shared by several cells (one agent, several judges) is counted in the first of them only, so the rows add
    up; "shard s" sums the wall time of the cell's shards, which ran in parallel: it can exceed the run's."""
    def usd(value: Any) -> str | None:  # None or NaN (a frame's None) when no model of the cell has a price
        return None if value is None or value != value else f"{value:.4f}"

    priced = any(usd(r.get("cost_usd")) for r in rows)
    table = Table(title="Cost per cell (total; this run)", caption="a shared agent run is counted in its first cell; "
                  "shard s = the cell's shard wall times summed (shards run in parallel)", title_justify="left")
    for label in ["cell", "tokens in", "tokens out", "LLM s", "shard s", *(["USD"] if priced else [])]:
        table.add_column(label, justify="left" if label == "cell" else "right")
    for r in rows:
        total, new = usd(r.get("cost_usd")), usd(r.get("new_cost_usd"))
        cost = [] if not priced else ["-" if total is None else f"{total}; {new}"]
        table.add_row("/".join(str(r[k]) for k in IDENTITY),
                      f"{r['tokens_in']}; {r['new_tokens_in']}", f"{r['tokens_out']}; {r['new_tokens_out']}",
                      f"{r['llm_seconds']:.1f}", f"{r['wall_seconds']:.1f}", *cost)
    return table


def cost_line(rows: Sequence[Row]) -> str | None:
    """The run's cost in one line (the compact output; `--wide` prints the table per cell)."""
    if not rows or "tokens_in" not in rows[0]:
        return None
    tin = sum(int(r.get("tokens_in") or 0) for r in rows)
    tout = sum(int(r.get("tokens_out") or 0) for r in rows)
    new = sum(int(r.get("new_tokens_in") or 0) for r in rows)
    secs = sum(float(r.get("llm_seconds") or 0.0) for r in rows)
    usd = [r.get("cost_usd") for r in rows if r.get("cost_usd") is not None and r.get("cost_usd") == r.get("cost_usd")]
    money = f", {sum(usd):.4f} USD" if usd else ""
    return (f"cost: {tin} tokens in ({new} sent this run), {tout} out, {secs:.1f} LLM s over {len(rows)} cells"
            f"{money} (--wide: per cell)")


def samples_table(title: str, samples: Sequence[Any], brief: bool = False) -> Table:
    """One cell's instances (perseval.report.samples.Sample): user, score, status, each verdict with its
    rationale (clipped), the trace id."""
    from perseval.report.samples import clip_text

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_lines=not brief)
    for label in ("instance", "user", "score", "status", "verdicts" if brief else "verdicts: rationale", "trace"):
        table.add_column(label, justify="right" if label == "score" else "left",
                         no_wrap=label in ("instance", "score", "trace"), overflow="fold")
    for s in samples:
        if brief:
            verdicts = " ".join(f"{v.mark()}{v.item_id}" for v in s.verdicts)
        else:
            verdicts = "\n".join(f"{v.mark()} {v.kind}/{v.item_id}{'#' + str(v.judge_repeat) if v.judge_repeat else ''}: "
                                 f"{clip_text(v.rationale or v.raw, 160)}" for v in s.verdicts)
        table.add_row(s.instance_id + (f"#{s.repeat}" if s.repeat else ""), s.user,
                      "-" if s.score is None else f"{s.score:.1f}", s.status, verdicts, s.trace_id or "-")
    return table


def pair_table(title: str, rows: Sequence[Any]) -> Table:
    """Two cells' instances side by side (perseval.report.samples.PairRow): both scores and both trace ids."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for label in ("instance", "user", "score A", "score B", "trace A", "trace B"):
        table.add_column(label, justify="right" if label.startswith("score") else "left",
                         no_wrap=label.startswith("trace") or label == "instance")
    for r in rows:
        table.add_row(r.instance_id + (f"#{r.repeat}" if r.repeat else ""), r.user, _sample_score(r.a),
                      _sample_score(r.b), r.a.trace_id or "-", r.b.trace_id or "-")
    return table


def _sample_score(s: Any) -> str:
    return f"{s.score:.1f}" if s.score is not None else s.status


def compare_tables(cells: Sequence[Mapping[str, Any]], parents: Sequence[Any], cost: bool = False) -> list[Table]:
    """`perseval compare`'s scores side by side (perseval.report.run_compare.scored_cells), one table per
    benchmark: each run's score [CI] and its users, the change from the first run; with `cost`, tokens and USD."""
    names = short_names([identity(c) for c in cells])
    ids = [p.info.run_id for p in parents]
    by_bench: dict[str, list[tuple[Mapping[str, Any], str]]] = {}
    for c, name in zip(cells, names):
        # a control's run under its cell, labelled; escaped, or rich takes "[swapped-history]" for markup and
        # drops it, leaving a second row of the cell's own name
        label = escape(name + (" [" + str(c["cell"]).split(" [", 1)[1] if " [" in str(c["cell"]) else ""))
        by_bench.setdefault(str(c["benchmark"]), []).append((c, label))
    tables = []
    for bench, members in by_bench.items():
        metrics = ", ".join(sorted({str(c["metric"]) for c, _ in members}))
        table = Table(title=f"{bench}: {metrics} (0-100) [95% CI] (users) per run",
                      title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("cell", no_wrap=True)
        for rid in ids:
            table.add_column(rid[:8], justify="right", no_wrap=True)
        for rid in ids[1:]:
            table.add_column(f"Δ {rid[:8]}", justify="right", no_wrap=True)
        priced = cost and any(s.costs.get("cost_usd") is not None for c, _ in members for s in c["runs"].values())
        for rid in ids if cost else []:
            table.add_column(f"tokens in/out {rid[:8]}", justify="right")
            if priced:
                table.add_column(f"USD {rid[:8]}", justify="right")
        for c, label in members:
            runs = c["runs"]
            first = runs.get(ids[0])
            row = [label, *[_scored_text(runs.get(rid)) for rid in ids]]
            for rid in ids[1:]:
                later = runs.get(rid)
                row.append(f"{later.score - first.score:+.1f}" if first and later and first.score is not None
                           and later.score is not None else "")
            for rid in ids if cost else []:
                s = runs.get(rid)
                row.append("" if s is None or "tokens_in" not in s.costs else
                           f"{s.costs['tokens_in']:.0f} / {s.costs.get('tokens_out', 0):.0f}")
                if priced:
                    row.append("" if s is None or s.costs.get("cost_usd") is None else f"{s.costs['cost_usd']:.4f}")
            table.add_row(*row)
        tables.append(table)
    return tables


def _scored_text(s: Any) -> str:
    if s is None or s.score is None or s.score != s.score:
        return "-"
    text = score_text({"score": s.score, "ci_low": s.ci_low, "ci_high": s.ci_high})
    return text + (f" ({s.n_users:.0f})" if s.n_users is not None else "")


def frame_table(frame: Any, title: str) -> Table:
    """A small pandas frame (index shown first) as a terminal table: a cell wraps inside its column, never a
    row across lines; a tuple index or column (a groupby's) reads "a / b"; counts as integers, other numbers
    to two places."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    names = frame.index.names if len(frame.index.names) > 1 else [frame.index.name]
    table.add_column(" / ".join(str(n) for n in names if n is not None), no_wrap=True)
    for col in frame.columns:
        table.add_column(_label(col), justify="right" if _numeric(frame[col]) else "left")
    for idx, row in frame.iterrows():
        table.add_row(_label(idx), *[_value_text(v) for v in row])
    return table


def _label(value: Any) -> str:
    return " / ".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


def _numeric(column: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(column)) and not pd.api.types.is_bool_dtype(column)


def _value_text(value: Any) -> str:
    from numbers import Integral, Real

    if value is None or (isinstance(value, Real) and value != value):
        return ""
    if isinstance(value, bool) or not isinstance(value, Real):
        return str(value)
    if isinstance(value, Integral) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.2f}"


def headline_markdown(rows: Sequence[Row]) -> str:
    """The compact headline as Markdown, one table per benchmark (a parent run's description in MLflow)."""

    names = short_names([identity(r) for r in rows])
    out = []
    for bench in dict.fromkeys(str(r.get("benchmark")) for r in rows):
        members = [(r, n) for r, n in zip(rows, names) if str(r.get("benchmark")) == bench]
        baseline = next((r.get("baseline") for r, _ in members if r.get("baseline")), None)
        metrics = ", ".join(sorted({str(r.get("metric")) for r, _ in members}))
        out.append(f"**{bench}** ({metrics}, 0-100" + (f"; Δ vs {baseline}" if baseline else "") + ")\n")
        out.append("| cell | score [CI] | users/n | Δ [CI] | p | judge AUC | status |\n|---|--:|--:|--:|--:|--:|---|")
        for r, name in members:
            users = f"{r.get('n_users') if r.get('n_users') is not None else '-'}/{r.get('n') or 0}"
            out.append(f"| {name} | {score_text(r) or '-'} | {users} | {delta_compact(r)} | {p_text(r.get('delta_p'))} "
                       f"| {judge_text(r)} | {status_text(r)} |")
        out.append("")
    level = next((r["level"] for r in rows if r.get("level")), 0.95)
    return "\n".join(out) + (f"[CI]: the two ends of the {100 * level:g}% user-clustered interval; users/n: users "
                             "and instances scored.\n")
