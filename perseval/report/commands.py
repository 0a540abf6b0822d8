"""What `perseval compare` and `perseval samples` do, once the command line is parsed: find the runs in the
MLflow store, read their records (perseval.report.sink.runs), render them (perseval.report.views) onto the
console. A name that fits nothing, a bad option or a record that cannot be read is a CommandError, raised
before anything is printed where it can be: the command line turns it into one line and its exit code."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from mlflow.tracking import MlflowClient
from rich.console import Console

from perseval.metrics.settings import StatisticsSettings
from perseval.report.analyses.run_compare import changed_cells, differences, run_pairs, within_pairs
from perseval.report.names import resolve_cell, resolve_cells
from perseval.report.record import CellRecord, RecordError, RunRecord, as_dict
from perseval.report.sink.runs import download_record, parent_runs, quiet_artifacts, sample_lines
from perseval.report.views.compare import compare_frame, compare_tables, shown_differences
from perseval.report.views.frames import frame_table
from perseval.report.views.samples import (UI, cells_table, choose, pair_table, samples_html, samples_of,
                                           samples_table, side_by_side, trace_lines, trace_url)


class CommandError(Exception):
    """What stops a command: one line for the user, and the exit code."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def _say(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _parents(client: MlflowClient, specs: list[str], latest: int) -> Any:
    try:
        found = parent_runs(client, specs, latest)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if not found.runs:
        raise CommandError(f"no finished runs for {specs}", 1)
    return found


def readable_records(console: Console, client: MlflowClient, parents: Sequence[Any]) -> list[tuple[Any, RunRecord]]:
    """(parent run, its record) for each run whose record can be read; each other one skipped with one line
    saying why; CommandError when none is left."""
    kept = []
    for p in parents:
        try:
            record = download_record(client, p.info.run_id)
        except RecordError as exc:
            _say(console, f"skipped {p.info.run_id[:8]} ({p.info.run_name}): {exc}")
            continue
        if record is None:
            _say(console, f"skipped {p.info.run_id[:8]} ({p.info.run_name}): logged before perseval wrote run "
                          "records")
            continue
        kept.append((p, record))
    if not kept:
        raise CommandError("no run named has a record that can be read")
    return kept


# ---- compare -------------------------------------------------------------------------------------------------

def _between(records: list[RunRecord], between: tuple[str, str]) -> list[tuple[RunRecord, CellRecord, CellRecord]]:
    """The cell pairs `--between A B` names in each run: under each judge (and control), the A cell beside the B
    cell of the same benchmark, backbone and retriever where both have them."""
    from perseval.report.analyses.comparisons import pick_baseline

    out = []
    for r in records:
        try:
            side_a, side_b = resolve_cells(r.cells, between[0]), resolve_cells(r.cells, between[1])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if {c.key for c in side_a} & {c.key for c in side_b}:
            raise CommandError(f"{between[0]!r} and {between[1]!r} name some of the same cells: name two different "
                               "ones")
        for a in side_a:
            candidates = [({"backbone": b.parts.backbone, "retriever": b.parts.retriever}, b) for b in side_b
                          if (b.parts.benchmark, b.parts.judge, b.control) == (a.parts.benchmark, a.parts.judge, a.control)]
            if len(side_a) == len(side_b) == 1:
                candidates = [({"backbone": side_b[0].parts.backbone, "retriever": side_b[0].parts.retriever},
                               side_b[0])]
            b = pick_baseline({"backbone": a.parts.backbone, "retriever": a.parts.retriever}, candidates)
            if b is not None:
                out.append((r, a, b))
    if not out:
        raise CommandError(f"{between[0]!r} and {between[1]!r} share no benchmark and judge: name both cells in full")
    return out


def _print_pairs(console: Console, pairs: list[tuple[RunRecord, CellRecord, CellRecord]], n: int, ui: str,
                 experiment_id: str) -> None:
    for r, a, b in pairs:
        rows = side_by_side(r.cell_instances(a.key), r.cell_instances(b.key))
        differ = sum(row.gap > 0 for row in rows)
        title = (f"run {r.run_id[:8]}: A = {a.label} vs B = {b.label} ({a.parts.benchmark}): {differ} of {len(rows)} "
                 f"instance(s) differ; the first {min(n, len(rows))}")
        console.print(pair_table(title, rows[:n]))
    if pairs:
        _say(console, "open a trace: " + trace_url(ui, experiment_id, "<trace id>"))


def compare(console: Console, client: MlflowClient, specs: list[str], latest: int = 2, out: Optional[Path] = None,
            cost: bool = False, baseline: Optional[str] = None, level: float = 0.95, detect: Optional[float] = None,
            between: Optional[tuple[str, str]] = None, instances: int = 0, ui: str = UI) -> None:
    """Each cell's score [CI] (users) side by side for the runs named (oldest first; an experiment's re-run that
    repeats the run before it is skipped), the change from the first; then each difference with its error
    bars; or, with `between`, the two cells' instances side by side in each run."""
    quiet_artifacts()
    found = _parents(client, specs, latest)
    for r in found.skipped:  # a cached re-run: the same results as the run before it
        _say(console, f"skipped {r.info.run_id[:8]} ({r.info.run_name}): the same results as the run before it, "
                      f"computed by {r.data.tags.get('perseval.computed_by', '?')[:8]} (name it to include it)")
    kept = readable_records(console, client, found.runs)
    parents, records = [p for p, _ in kept], [r for _, r in kept]
    pairs = _between(records, between) if between else None  # a bad name: before any output
    _say(console, "runs (oldest first): " + "; ".join(f"{p.info.run_name} {p.info.run_id[:8]}" for p in parents))
    if pairs is not None:
        _print_pairs(console, pairs, instances or 10, ui, parents[0].info.experiment_id)
        return
    statistics = StatisticsSettings(level=level)
    diffs = differences(run_pairs(records) + [p for r in records if baseline for p in within_pairs(r, baseline)],
                        statistics, detect)
    frame = compare_frame(records, diffs, cost)
    for table in compare_tables(records, frame, console.width, cost):
        console.print(table)
    if out:
        out.write_text(frame.to_csv(index=False) if out.suffix == ".csv" else frame.to_markdown(index=False) + "\n")
        _say(console, f"written to {out}")
    if not diffs.empty:
        tests = int(diffs["p (Holm)"].notna().sum())
        console.print(frame_table(shown_differences(diffs), f"Differences ({100 * level:g}% user-clustered intervals; "
                                  f"p Holm-corrected across the {tests} comparisons below)", whole=("Δ [CI]",)))
        if out:
            path = out.with_name(f"{out.stem}_differences{out.suffix}")
            path.write_text(diffs.to_csv(index=False) if out.suffix == ".csv" else
                            shown_differences(diffs).to_markdown() + "\n")
            _say(console, f"written to {path}")
    if instances:
        changed = changed_cells(records)
        if not changed:
            _say(console, "no cell changed between the runs: no instance to set side by side")
        for later, first, cell in changed:
            rows = side_by_side(records[0].cell_instances(first.key), later.cell_instances(cell.key))
            console.print(pair_table(f"{cell.parts.benchmark}/{cell.label}: A = run {records[0].run_id[:8]}, B = run "
                                     f"{later.run_id[:8]}; the first {min(instances, len(rows))}", rows[:instances]))


# ---- samples -------------------------------------------------------------------------------------------------

def sample_json(record: RunRecord, cell: CellRecord, shown: Sequence[Any]) -> str:
    """The cell as the record holds it, and the instances shown (in their order) with what the per-sample log
    holds of each: its messages, answer and parsed answer."""
    return json.dumps({"run_id": record.run_id, "computed_by": record.computed_by, **cell.model_dump(),
                       "instances": [as_dict(s.instance) | {k: s.line.get(k) for k in ("messages", "answer",
                                                                                          "parsed")}
                                     for s in shown]}, indent=1, ensure_ascii=False)


def samples(console: Console, client: MlflowClient, run: str, cell: Optional[str] = None, sort: Optional[str] = None,
            where: Sequence[str] = (), limit: Optional[int] = None, brief: bool = False, html: Optional[Path] = None,
            as_json: bool = False, ui: str = UI) -> None:
    """Every instance of one cell of a run (its latest distinct results when `run` names an experiment): user,
    score, status, the prompt's first lines, the answer, each verdict with its reason, a link to its trace;
    with no cell, the run's cells."""
    quiet_artifacts()
    parent = _parents(client, [run], 1).runs[-1]
    try:
        record = download_record(client, parent.info.run_id)
    except RecordError as exc:
        raise CommandError(str(exc)) from None
    if record is None:
        raise CommandError(f"run {parent.info.run_id[:8]} was logged before perseval wrote run records: open its "
                           "traces in `perseval ui`")
    title = f"{parent.info.run_name} ({parent.info.run_id[:8]})"
    if not record.cells:
        raise CommandError(f"run {parent.info.run_id[:8]}: its record has no cell at all: the record was edited or "
                           "damaged (open its traces in `perseval ui`)")
    if cell is None:
        console.print(cells_table(record, f"cells of {title}: perseval samples {run} CELL lists one"))
        return
    try:
        chosen = resolve_cell(record.cells, cell)
        choose([], where, sort, limit)  # a bad --where or --sort: refused before anything is read
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    every = samples_of(record, chosen, sample_lines(client, record))
    shown = choose(every, where, sort, limit)
    if as_json:
        print(sample_json(record, chosen, shown))
        return
    console.print(samples_table(f"{chosen.parts.benchmark}/{chosen.label} in {title}: {len(shown)} of {len(every)} "
                                "instance(s)", shown, brief))
    experiment = parent.info.experiment_id
    lines = trace_lines(shown, ui, experiment)
    if lines:
        _say(console, f"traces (open in `perseval ui` at {ui}):")
    for line in lines:
        _say(console, f"  {line}")
    if html:
        answers = {(s.instance.instance_id, s.instance.repeat): s.answer for s in shown}
        html.write_text(samples_html(chosen, [s.instance for s in shown], answers, ui, experiment))
        _say(console, f"written to {html}")
