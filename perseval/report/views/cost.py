"""What the cells cost, from the record: in one line (the compact output) or per cell (`--wide`). A run shared by
several cells (one agent, several judges) is counted in the first of them only, so the rows add up; "shard s"
sums the wall time of the cell's shards, which ran in parallel: it can exceed the run's."""
from __future__ import annotations

from typing import Optional, Sequence

from rich.table import Table
from rich.text import Text

from perseval.report.record import CellRecord


def _usd(value: Optional[float]) -> Optional[str]:
    return None if value is None else f"{value:.4f}"


def cost_table(cells: Sequence[CellRecord]) -> Table:
    priced = any(c.cost.cost_usd is not None for c in cells)
    table = Table(title="Cost per cell (total; this run)", caption="a shared agent run is counted in its first cell; "
                  "shard s = the cell's shard wall times summed (shards run in parallel)", title_justify="left")
    for label in ["cell", "tokens in", "tokens out", "LLM s", "shard s", *(["USD"] if priced else [])]:
        table.add_column(label, justify="left" if label == "cell" else "right")
    for c in cells:
        k = c.cost
        money = [] if not priced else ["-" if k.cost_usd is None else f"{_usd(k.cost_usd)}; {_usd(k.new_cost_usd)}"]
        table.add_row(Text(f"{c.parts.benchmark}/{c.label}"), f"{k.tokens_in}; {k.new_tokens_in}",
                      f"{k.tokens_out}; {k.new_tokens_out}", f"{k.llm_seconds or 0.0:.1f}",
                      f"{k.wall_seconds or 0.0:.1f}", *money)
    return table


def cost_line(cells: Sequence[CellRecord]) -> Optional[str]:
    """The run's cost in one line (the compact output; `--wide` prints the table per cell)."""
    if not cells or all(c.cost.tokens_in is None for c in cells):
        return None
    tin = sum(c.cost.tokens_in or 0 for c in cells)
    tout = sum(c.cost.tokens_out or 0 for c in cells)
    new = sum(c.cost.new_tokens_in or 0 for c in cells)
    secs = sum(c.cost.llm_seconds or 0.0 for c in cells)
    usd = [c.cost.cost_usd for c in cells if c.cost.cost_usd is not None]
    money = f", {sum(usd):.4f} USD" if usd else ""
    return (f"cost: {tin} tokens in ({new} sent this run), {tout} out, {secs:.1f} LLM s over {len(cells)} cells"
            f"{money} (--wide: per cell)")
