"""The whole output of a run, rendered from its record: the headline tables and their note, the Controls tables
and theirs, the probe check of each judge, the cost, which instances have a trace. `perseval run` prints it at
the terminal's width; the parent MLflow run's description and `headline.md` are the same text at 100 columns."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from rich.console import Console, RenderableType
from rich.text import Text

from perseval.report.record import RunRecord
from perseval.report.words import NOT_INTERPRETABLE
from perseval.report.views.controls import CONTROLS_NOTE, controls_tables
from perseval.report.views.cost import cost_line, cost_table
from perseval.report.views.headline import headline_note, headline_tables, wide_table
from perseval.report.views.probe_check import probe_lines

MARKDOWN_WIDTH = 100  # headline.md and the parent run's description: the headline as a 100-column terminal shows it
SMALL_MODEL_WARNING = (
    "Note: the embedded default serves a 135M-parameter model. Its answers and judgments are weak: this run "
    "shows that the pipeline works end to end and how fast, not how good an agent is.")


def traces_line(record: RunRecord) -> str | None:
    t = record.traces
    if t is None:
        return None
    which = {"all": "every output", "failed": "the outputs that went wrong"}.get(
        t.selection, f"the first {t.selection} instances of each cell")
    return (f"traces: {t.traced} of {t.outputs} outputs have an MLflow trace ({which}; mlflow.traces); record.json "
            "and samples.jsonl hold every instance")


def run_output(record: RunRecord, width: int, wide: bool = False) -> list[RenderableType]:
    """What `perseval run` prints of its record, fitted to `width` columns (`wide`: every column)."""
    cells = record.cells
    out: list[RenderableType] = [wide_table(cells)] if wide else list(headline_tables(cells, width))
    out.append(Text(headline_note(cells, wide)))
    controls = controls_tables(cells, width, wide)
    if controls:
        out += [*controls, Text(CONTROLS_NOTE)]
    lines = probe_lines(cells)
    if lines:
        out.append(Text("Judge check on answers of known verdict (judge_probes):"))
    out += [Text(f"  {line}", style="red" if NOT_INTERPRETABLE in line else "green") for line in lines]
    if wide and any(c.cost.tokens_in is not None for c in cells):
        out.append(cost_table(cells))
    elif (line := cost_line(cells)) is not None:
        out.append(Text(line))
    if (line := traces_line(record)) is not None:
        out.append(Text(line))
    return out


def record_lines(record: RunRecord, folder: Path, width: int) -> list[str]:
    """Where the record is (the path on a line of its own where it does not fit beside its label: a path is
    never split), and which run computed its results when this one reused them."""
    where = f"record: {folder / 'record.json'}"
    lines = [where] if len(where) <= width else ["record:", str(folder / "record.json")]
    if record.computed_by != record.run_id:
        lines.append(f"results computed by run {record.computed_by[:8]}: this run reused its cached outputs")
    return lines


def stage_line(timings: dict[str, float]) -> str:
    """"stage seconds: construct 1.2, index 0.4, ... (sum 157.7)": each stage's wall seconds, in order."""
    parts = [f"{stage} {seconds:.1f}" for stage, seconds in timings.items() if isinstance(seconds, (int, float))]
    total = sum(v for v in timings.values() if isinstance(v, (int, float)))
    return "stage seconds: " + ", ".join(parts) + f" (sum {total:.1f})"


def render_text(renderables: Sequence[RenderableType], width: int) -> str:
    """The renderables as a terminal of `width` columns shows them (no colour)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for r in renderables:
        console.print(r)
    return console.export_text()


def headline_markdown(record: RunRecord) -> str:
    """The parent run's description and headline.md: the run's output as printed, in a Markdown code block."""
    return "```\n" + render_text(run_output(record, MARKDOWN_WIDTH), MARKDOWN_WIDTH).rstrip() + "\n```\n"
