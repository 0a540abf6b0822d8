"""The cross-benchmark summary (perseval.report.cross_benchmark): the roles read from the resolved agents of
configs/experiments/personalization_cpu.yaml, and the table built from crafted headline rows."""
from __future__ import annotations

from perseval.report.cross_benchmark import agent_roles, cross_benchmark_table
from perseval.experiment.load import load_experiment

from .conftest import REPO


def test_roles_come_from_what_each_agent_reads():
    roles = agent_roles(load_experiment(REPO / "configs" / "experiments" / "personalization_cpu.yaml"))
    assert roles["persona-mem-oracle"] == roles["prefeval-oracle"] == roles["iba-oracle"] == "oracle"
    assert roles["persona-mem-no-history"] == roles["prefeval-no-history"] == roles["bespoke-no-context"] == "no history"
    assert roles["persona-mem-long-context"] == roles["prefeval-zero-shot"] == roles["iba-rag"] == "history"
    assert (roles["lamp-rag"], roles["lamp-no-profile"], roles["lamp-oracle"]) == ("history", "no history", "oracle")


def _row(bench: str, agent: str, judge: str, score: float | None, low: float | None = None,
         high: float | None = None, backbone: str = "m", users: int | None = None) -> dict:
    return {"benchmark": bench, "agent": agent, "judge": judge, "score": score, "ci_low": low, "ci_high": high,
            "backbone": backbone, "n_users": users}


def test_one_row_per_role_one_column_per_benchmark_with_intervals():
    rows = [_row("pm", "pm-long", "choice", 30.0, 10.0, 50.0, users=12), _row("pm", "pm-none", "choice", 20.0, 0.0, 45.5),
            _row("pm", "pm-oracle", "choice", 100.0, 100.0, 100.0),
            _row("pe", "pe-zs", "llm", None), _row("pe", "pe-zs", "rule", 50.0, 0.0, 100.0),
            _row("pe", "pe-zs", "rule", 60.0, 20.0, 90.0, backbone="big")]
    roles = {"pm-long": "history", "pm-none": "no history", "pm-oracle": "oracle", "pe-zs": "history"}
    table = cross_benchmark_table(rows, roles)
    assert list(table.index) == ["history", "no history", "oracle"] and list(table.columns) == ["pm", "pe"]
    assert table.loc["history", "pm"] == "pm-long: 30.0 [10.0, 50.0] (12 users)"
    assert table.loc["no history", "pe"] == "-" and table.loc["oracle", "pm"] == "pm-oracle: 100.0 [100.0, 100.0]"
    assert table.loc["history", "pe"] == ("pe-zs/m/llm: -; pe-zs/m/rule: 50.0 [0.0, 100.0]; "
                                          "pe-zs/big/rule: 60.0 [20.0, 90.0]")
