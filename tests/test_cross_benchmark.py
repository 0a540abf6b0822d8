"""The cross-benchmark summary (perseval.report.views.cross_benchmark): the roles read from the resolved agents
of configs/experiments/personalization_cpu.yaml (perseval.report.build.agent_roles), and the table rendered from
record cells: a cell's label and score [CI] (users), "—" where its judge does not discriminate."""
from __future__ import annotations

from perseval.experiment.load import load_experiment
from perseval.report.build import agent_roles
from perseval.report.views.cross_benchmark import cross_benchmark_markdown, cross_benchmark_table

from .conftest import REPO
from .record_helpers import cell, labelled


def test_roles_come_from_what_each_agent_reads():
    roles = agent_roles(load_experiment(REPO / "configs" / "experiments" / "personalization_cpu.yaml"))
    assert roles["persona-mem-oracle"] == roles["prefeval-oracle"] == roles["iba-oracle"] == "oracle"
    assert roles["persona-mem-no-history"] == roles["prefeval-no-history"] == roles["bespoke-no-context"] == "no history"
    assert roles["persona-mem-long-context"] == roles["prefeval-zero-shot"] == roles["iba-rag"] == "history"
    assert (roles["lamp-rag"], roles["lamp-no-profile"], roles["lamp-oracle"]) == ("history", "no history", "oracle")


def test_one_row_per_role_one_column_per_benchmark_with_intervals():
    cells = labelled([
        cell("pm", "pm-long", "choice", 30.0, 10.0, 50.0, users=12), cell("pm", "pm-none", "choice", 20.0, 0.0, 45.5,
                                                                          role="no history"),
        cell("pm", "pm-oracle", "choice", 100.0, 100.0, 100.0, role="oracle"),
        cell("pe", "pe-zs", "llm", None), cell("pe", "pe-zs", "rule", 50.0, 0.0, 100.0),
        cell("pe", "pe-zs", "rule", 60.0, 20.0, 90.0, backbone="big"), cell("pe", "pe-judged", "llm", 70.0, 60.0, 80.0,
                                                                            users=4, flagged=True)])
    table = cross_benchmark_table(cells)
    assert list(table.index) == ["history", "no history", "oracle"] and list(table.columns) == ["pm", "pe"]
    assert table.loc["history", "pm"] == "pm-long: 30.0 [10.0, 50.0] (12 users)"
    assert table.loc["no history", "pe"] == "-" and table.loc["oracle", "pm"] == "pm-oracle: 100.0 [100.0, 100.0]"
    assert table.loc["history", "pe"] == ("pe-zs/llm/m: -; pe-zs/rule/m: 50.0 [0.0, 100.0]; "
                                          "pe-zs/rule/big: 60.0 [20.0, 90.0]; pe-judged/llm/m: —")  # no number, no users
    assert "70.0" not in cross_benchmark_markdown(cells)
    assert cross_benchmark_markdown([c for c in cells if c.parts.benchmark == "pm"]) is None  # one benchmark
