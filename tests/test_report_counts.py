"""What the report says about cells (issue 22): a judge with nothing to judge is "no items", never "complete"
with n 0; a run shared by several cells is counted once in the cost rows; per-cell seconds are labelled as
summed shard time; counts in Markdown tables are whole numbers."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pandas as pd
from rich.console import Console

from perseval.pipeline.cost import plan_cost
from perseval.report.analyses.status import ScoreManifest
from perseval.report.record import Cost
from perseval.report.views.cost import cost_table
from perseval.pipeline.stages import write_artifact

from .record_helpers import cell


def cell_status(summary):
    return ScoreManifest.of(summary).status


def test_a_cell_whose_judge_had_no_items_is_not_complete():
    assert cell_status({"outputs": {"ok": 30}, "judgments": {}}) == "no items"
    assert cell_status({"outputs": {"ok": 30}, "judgments": {"scored": 30}}) == "complete"
    assert cell_status({"outputs": {"ok": 29, "failed": 1}, "judgments": {}}) == "incomplete"
    assert cell_status({"outputs": {"ok": 30}, "judgments": {"scored": 29, "failed": 1}}) == "incomplete"


class Records:
    """Unit records: each run part used 100 tokens in / 10 out in 5 s; judges none; manifests empty."""

    def parts(self, stage, key, dkey):
        if stage == "run":
            return [{"run_id": "now", "wall_seconds": 5.0, "requests": 2, "tokens_in": 100, "tokens_out": 10}] * 2
        return [{"run_id": "now", "wall_seconds": 1.0}] * 2

    def manifest(self, stage, key):
        return {}


def test_a_run_shared_by_two_cells_is_counted_once():
    run = NS(key="run-1", model=None, data=NS(key="d"))
    judged = [NS(key=f"j{i}", model=None, run=run) for i in (1, 2)]
    cells = [NS(key=f"c{i}", run=run, judged=judged[i - 1], name=f"cell {i}") for i in (1, 2)]
    plan = NS(runs=lambda: [run], judgings=lambda: judged, data=[], index=[], cells=cells)
    cost = plan_cost(NS(), plan, Records(), "now")
    first, second = (cost.cells[c.key]["cell"] for c in cells)
    assert (first.tokens_in, second.tokens_in) == (200, 0)  # the run's 2 parts, in the first cell only
    assert cost.cells["c2"]["run"].tokens_in == 200  # the run's own figure is still the run's
    assert first.tokens_in + second.tokens_in == cost.total.tokens_in
    assert first.wall_seconds + second.wall_seconds == cost.total.wall_seconds == 10.0 + 2 * 2.0


def test_the_cost_table_labels_seconds_as_summed_shard_time():
    row = cell("iba", "a", "j", 50.0).model_copy(update={"cost": Cost(
        tokens_in=1, new_tokens_in=1, tokens_out=1, new_tokens_out=1, llm_seconds=1.0, wall_seconds=3500.0)})
    console = Console(width=200, record=True)
    console.print(cost_table([row]))
    text = console.export_text()
    assert "shard s" in text and "wall s" not in text and "counted in its first cell" in text


def test_markdown_tables_print_counts_as_whole_numbers(tmp_path):
    table = pd.DataFrame({"Work": [50.123, None], "Overall": [50.1, 61.0], "n": [30, 4], "unscored": [0, 1]},
                         index=["iba-rag", "iba-agent"])
    write_artifact(tmp_path, "table4", table)
    md = (tmp_path / "table4.md").read_text()
    first = [c.strip() for c in next(ln for ln in md.splitlines() if ln.startswith("| iba-rag")).split("|")]
    assert first[4:6] == ["30", "0"]
    assert "30.0" not in md and "50.1" in md and " 0.0 " not in md
    assert pd.read_csv(tmp_path / "table4.csv", index_col=0)["n"].tolist() == [30, 4]
