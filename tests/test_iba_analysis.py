"""IBA-Bench analyses on hand-made score frames: every expected number is worked out by hand."""
from __future__ import annotations

import io
import json
import statistics

import pandas as pd
import pytest
from matplotlib.figure import Figure

from perseval.benchmarks.base import ANALYSIS_COLUMNS
from perseval.benchmarks.iba.analysis import analyze
from perseval.benchmarks.iba.analysis_slices import window_starts
from perseval.benchmarks.iba.analysis_tables import ablation_flags
from perseval.benchmarks.iba.qa import make_qa_probes
from perseval.core.instances import Instance

WRITING, PLANNING = "Writing and Design", "Planning"


def row(agent, judge, iid, value, *, repeat=0, judge_repeat=0, kind="iba.rag", params=None, backbone="m",
        retriever="r", group=WRITING):
    return {"cell": f"{agent}/{judge}", "agent": agent, "agent_kind": kind,
            "agent_params": json.dumps(params or {}, sort_keys=True), "backbone": backbone, "retriever": retriever,
            "judge": judge, "instance_id": iid, "repeat": repeat, "judge_repeat": judge_repeat, "group": group,
            "metric": "score", "value": value, "n_items": 2, "n_unscored": 0 if value is not None else 2}


def frame(rows):
    return pd.DataFrame(rows, columns=ANALYSIS_COLUMNS)


def inst(iid, group=WRITING, n_evidence=1, n_constraints=1, n_dynamic=0, **payload):
    return Instance(iid, "iba", f"u-{iid}", group, "task", {"action_type": "generate", "n_evidence": n_evidence,
                                                              "n_constraints": n_constraints, **payload},
                    {"checkpoints": [{"id": "d", "dimension": "d", "value": "v", "statement": "s"}],
                     "preferences": [{"dimension": "d", "value": "v", "previous": None, "dynamic": False}],
                     "n_dynamic": n_dynamic})


# --- Tables 4, 6-8: mean over repeats, then instances; headline = mean over judges ---------------------------


@pytest.fixture
def two_judges():
    instances = [inst("i1"), inst("i2"), inst("i3", group=PLANNING)]
    rows = [
        # judge J1: i1 = mean(100, 50) over agent repeats = 75; i2 = 0; i3 = 100 (its None is skipped)
        row("rag", "J1", "i1", 100.0), row("rag", "J1", "i1", 50.0, repeat=1),
        row("rag", "J1", "i2", 0.0),
        row("rag", "J1", "i3", 100.0, group=PLANNING), row("rag", "J1", "i3", None, repeat=1, group=PLANNING),
        # judge J2: i1 = 100; i2 = 100; i3 = mean(0, 50) over judge repeats = 25
        row("rag", "J2", "i1", 100.0), row("rag", "J2", "i2", 100.0),
        row("rag", "J2", "i3", 0.0, group=PLANNING), row("rag", "J2", "i3", 50.0, judge_repeat=1, group=PLANNING),
    ]
    return frame(rows), instances


def test_per_judge_tables(two_judges):
    out = analyze(*two_judges, {})
    j1, j2 = out["table_judge_J1"], out["table_judge_J2"]
    assert list(j1.columns) == ["Writing", "Plan.", "Overall", "n", "unscored"]
    assert list(j1.index) == ["rag (m, r)"]
    assert j1.loc["rag (m, r)", "Writing"] == pytest.approx((75 + 0) / 2)
    assert j1.loc["rag (m, r)", "Plan."] == pytest.approx(100)
    assert j1.loc["rag (m, r)", "Overall"] == pytest.approx((75 + 0 + 100) / 3)  # over instances, not domains
    assert j1.loc["rag (m, r)", "unscored"] == 1 and j1.loc["rag (m, r)", "n"] == 3
    assert j2.loc["rag (m, r)", "Writing"] == pytest.approx(100)
    assert j2.loc["rag (m, r)", "Plan."] == pytest.approx(25)
    assert j2.loc["rag (m, r)", "Overall"] == pytest.approx(75)
    assert j2.loc["rag (m, r)", "unscored"] == 0


def test_table4_is_the_mean_of_the_judge_tables(two_judges):
    t4 = analyze(*two_judges, {})["table4_mean_over_judges"]
    r = t4.loc["rag (m, r)"]
    assert r["Writing"] == pytest.approx((37.5 + 100) / 2)
    assert r["Plan."] == pytest.approx((100 + 25) / 2)
    assert r["Overall"] == pytest.approx(((75 + 0 + 100) / 3 + 75) / 2)
    assert r["unscored"] == 1


def test_domains_in_paper_order_and_absent_ones_left_out():
    rows = [row("a", "J", "x", 10.0, group="Information Management"), row("a", "J", "y", 20.0, group=WRITING),
            row("a", "J", "z", 30.0, group="Exercise and Health")]
    t4 = analyze(frame(rows), [], {})["table4_mean_over_judges"]
    assert list(t4.columns) == ["Writing", "Health", "Info.", "Overall", "n", "unscored"]


def test_all_unscored_instance_is_excluded_and_counted():
    rows = [row("a", "J", "i1", 80.0), row("a", "J", "i2", None), row("a", "J", "i2", None, repeat=1)]
    t4 = analyze(frame(rows), [inst("i1"), inst("i2")], {})["table4_mean_over_judges"]
    assert t4.loc["a (m, r)", "Overall"] == pytest.approx(80.0)  # not 40: None is not 0
    assert t4.loc["a (m, r)", "n"] == 1 and t4.loc["a (m, r)", "unscored"] == 2


def test_empty_frame_gives_nothing():
    assert analyze(frame([]), [], {}) == {}


# --- Table 9: std over judge repeats ---------------------------------------------------------------------


def test_table9_std_over_judge_repeats():
    vals = {  # judge repeat -> (i1 Writing agent repeats, i2 Writing, i3 Planning)
        0: ([100.0, 0.0], 0.0, 50.0),
        1: ([100.0], 100.0, 0.0),
        2: ([0.0], 0.0, 100.0),
    }
    rows = []
    for jr, (i1, i2, i3) in vals.items():
        rows += [row("a", "Q4", "i1", v, repeat=k, judge_repeat=jr) for k, v in enumerate(i1)]
        rows += [row("a", "Q4", "i2", i2, judge_repeat=jr), row("a", "Q4", "i3", i3, judge_repeat=jr, group=PLANNING)]
    rows.append(row("a", "DS", "i1", 10.0))  # a single-repeat judge gets no Table 9
    out = analyze(frame(rows), [], {})
    assert "table9_std_over_repeats_DS" not in out
    t9 = out["table9_std_over_repeats_Q4"]
    assert list(t9.columns) == ["Writing", "Plan.", "Overall", "repeats"]
    # per judge repeat: i1 = mean over agent repeats; domain = mean over instances
    writing = [(50 + 0) / 2, (100 + 100) / 2, (0 + 0) / 2]
    planning = [50, 0, 100]
    overall = [(50 + 0 + 50) / 3, (100 + 100 + 0) / 3, (0 + 0 + 100) / 3]
    r = t9.loc["a (m, r)"]
    assert r["Writing"] == pytest.approx(statistics.stdev(writing))  # sample std, ddof = 1
    assert r["Plan."] == pytest.approx(statistics.stdev(planning))
    assert r["Overall"] == pytest.approx(statistics.stdev(overall))
    assert r["repeats"] == 3


# --- Table 5: ablation deltas -------------------------------------------------------------------------


def ablation_rows():
    agents = {  # the FC variant comes first: the default base must still be the plain, unablated agent
        "iba-fc": ({"controller": "fc"}, (100.0, 100.0)),
        "iba": ({"controller": "pipeline", "deep_retrieval": True, "synthesis": "trajectory"}, (80.0, 60.0)),
        "iba-wo-dr": ({"deep_retrieval": False}, (70.0, 40.0)),
        "iba-rag-synth": ({"synthesis": "rag"}, (90.0, 60.0)),
    }
    rows = []
    for name, (params, (w, p)) in agents.items():
        rows += [row(name, "J", "i1", w, kind="iba.agent", params=params),
                 row(name, "J", "i2", p, kind="iba.agent", params=params, group=PLANNING)]
    rows += [row("rag", "J", "i1", 0.0), row("rag", "J", "i2", 0.0, group=PLANNING)]  # not an iba.agent
    return frame(rows)


def test_table5_ablation_deltas_against_the_unablated_non_fc_agent():
    t5 = analyze(ablation_rows(), [], {})["table5_ablation"]
    assert list(t5.columns) == ["Writing", "Δ Writing", "Plan.", "Δ Plan.", "Overall", "Δ Overall"]
    assert list(t5.index) == ["iba-fc (m, r)", "iba (m, r)", "iba-wo-dr (m, r)", "iba-rag-synth (m, r)"]
    assert t5.loc["iba (m, r)", ["Δ Writing", "Δ Plan.", "Δ Overall"]].tolist() == [0, 0, 0]
    wo = t5.loc["iba-wo-dr (m, r)"]
    assert (wo["Writing"], wo["Δ Writing"]) == (70, -10)
    assert wo["Δ Plan."] == -20
    assert wo["Overall"] == pytest.approx(55) and wo["Δ Overall"] == pytest.approx(-15)
    assert t5.loc["iba-fc (m, r)", "Δ Overall"] == pytest.approx(30)


def test_table5_params_choose_agents_and_base():
    t5 = analyze(ablation_rows(), [], {"ablation_agents": ["iba-wo-dr", "iba-fc"], "ablation_base": "iba-fc"})[
        "table5_ablation"]
    assert list(t5.index) == ["iba-fc (m, r)", "iba-wo-dr (m, r)"]
    assert t5.loc["iba-wo-dr (m, r)", "Δ Overall"] == pytest.approx(55 - 100)


def test_ablation_flags():
    assert ablation_flags({"deep_retrieval": False, "controller": "fc"}) == ["deep_retrieval"]
    assert ablation_flags({"broad_thinking": False, "rerank": False}) == ["broad_thinking", "rerank"]
    assert ablation_flags({"no_bt_da": True, "synthesis": "rag"}) == ["no_bt_da", "synthesis"]
    assert ablation_flags({"deep_retrieval": True, "top_k": 3}) == []


def test_no_ablation_table_without_iba_agents(two_judges):
    assert "table5_ablation" not in analyze(*two_judges, {})


# --- Table 10: retriever swap ---------------------------------------------------------------------------


def test_table10_retriever_swap():
    rows = [row("rag", "J", "i1", 50.0, retriever="bge"), row("rag", "J", "i1", 70.0, retriever="mpnet"),
            row("other", "J", "i1", 30.0, retriever="bge")]  # one retriever only: not a row of Table 10
    t10 = analyze(frame(rows), [], {})["table10_retriever_swap"]
    assert list(t10.columns) == ["bge", "mpnet", "Δ mpnet"]  # base: the retriever most systems use
    assert list(t10.index) == ["rag (m)"]
    assert t10.loc["rag (m)"].tolist() == [50, 70, 20]
    t10b = analyze(frame(rows), [], {"retriever_base": "mpnet"})["table10_retriever_swap"]
    assert t10b.loc["rag (m)", "Δ bge"] == -20


def test_no_table10_with_a_single_retriever(two_judges):
    assert "table10_retriever_swap" not in analyze(*two_judges, {})


# --- section 5.3 slices -----------------------------------------------------------------------------------


def test_by_evidence_buckets():
    instances = [inst("e1", n_evidence=1), inst("e2", n_evidence=2), inst("e5", n_evidence=5),
                 inst("e7", n_evidence=7)]
    rows = [row("a", "J", "e1", 10.0), row("a", "J", "e2", 20.0), row("a", "J", "e5", 50.0),
            row("a", "J", "e7", 70.0), row("a", "J", "e7", None, repeat=1)]
    t = analyze(frame(rows), instances, {})["by_evidence"]
    assert list(t.columns) == ["1", "2", "5+", "unscored"]
    assert t.loc["a (m, r)"].tolist() == [10, 20, pytest.approx(60), 1]  # 5+ pools 5 and 7


def test_by_preferences_sliding_window_by_hand():
    # n_constraints per instance and its value; 7 is capped to the 5+ bucket
    data = {"p1": (1, 100.0), "p2a": (2, 50.0), "p2b": (2, 100.0), "p3": (3, 0.0), "p4": (4, 100.0),
            "p5": (5, 20.0), "p7": (7, 40.0)}
    instances = [inst(i, n_constraints=n) for i, (n, _) in data.items()]
    rows = [row("a", "J", i, v) for i, (_, v) in data.items()]
    rows += [row("a", "J2", i, 0.0) for i in data]  # a second judge scores everything 0
    t = analyze(frame(rows), instances, {})["by_preferences"]
    assert list(t.columns) == ["1-2", "2-3", "3-4", "4-5+", "unscored"]
    # window k holds the instances with k <= n <= k+1, pooled (each instance weighs the same)
    by_hand_j = {"1-2": (100 + 50 + 100) / 3, "2-3": (50 + 100 + 0) / 3, "3-4": (0 + 100) / 2,
                 "4-5+": (100 + 20 + 40) / 3}
    for label, j in by_hand_j.items():
        assert t.loc["a (m, r)", label] == pytest.approx((j + 0) / 2)  # mean over judges


def test_window_starts():
    assert window_starts(pd.Series([1, 5]), 2) == [1, 2, 3, 4]
    assert window_starts(pd.Series([3, 3]), 2) == [3]
    assert window_starts(pd.Series([1, 5]), 3) == [1, 2, 3]


def test_by_preferences_window_width_param():
    instances = [inst(f"q{n}", n_constraints=n) for n in (1, 2, 3)]
    rows = [row("a", "J", f"q{n}", float(10 * n)) for n in (1, 2, 3)]
    t = analyze(frame(rows), instances, {"preference_window": 3})["by_preferences"]
    assert list(t.columns) == ["1-3", "unscored"] and t.iloc[0, 0] == pytest.approx(20)


def test_static_vs_dynamic():
    instances = [inst("s1"), inst("s2"), inst("d1", n_dynamic=1),
                 inst("d2", n_dynamic=0, dynamic=True)]  # payload 'dynamic' wins over gold n_dynamic
    rows = [row("a", "J", "s1", 80.0), row("a", "J", "s2", 60.0), row("a", "J", "d1", 30.0),
            row("a", "J", "d2", 50.0)]
    t = analyze(frame(rows), instances, {})["static_vs_dynamic"]
    assert list(t.columns) == ["Static", "Dynamic", "Dynamic - Static", "unscored"]
    assert t.loc["a (m, r)"].tolist() == [70, 40, -30, 0]


def test_qa_vs_task_gap_on_paired_instances():
    tasks = [inst("t1"), inst("t2"), inst("t3")]
    probes = make_qa_probes(tasks[:2])
    rows = [
        row("a", "J1", "t1", 40.0), row("a", "J1", "t2", 60.0), row("a", "J1", "t3", 100.0),
        row("a", "J1", "t1-qa", 100.0), row("a", "J1", "t2-qa", None),  # t2 has no QA value under J1: unpaired
        row("a", "J2", "t1", 20.0), row("a", "J2", "t2", 60.0),
        row("a", "J2", "t1-qa", 80.0), row("a", "J2", "t2-qa", 80.0),
    ]
    out = analyze(frame(rows), tasks + probes, {})
    t = out["qa_vs_task"]
    assert list(t.columns) == ["QA", "Task", "Gap", "n", "unscored"]
    # J1 pairs: t1 -> QA 100, Task 40. J2 pairs: t1, t2 -> QA 80, Task (20 + 60) / 2 = 40
    r = t.loc["a (m, r)"]
    assert r["QA"] == pytest.approx(90) and r["Task"] == pytest.approx(40) and r["Gap"] == pytest.approx(50)
    assert r["n"] == 2 and r["unscored"] == 1
    # QA twins stay out of the task tables
    t4 = out["table4_mean_over_judges"]
    assert t4.loc["a (m, r)", "Overall"] == pytest.approx(((40 + 60 + 100) / 3 + (20 + 60) / 2) / 2)


def test_no_qa_table_without_probes(two_judges):
    assert "qa_vs_task" not in analyze(*two_judges, {})


# --- figures ------------------------------------------------------------------------------------------


def test_figures_have_one_series_per_system():
    instances = [inst("i1", n_evidence=1, n_constraints=1), inst("i2", n_evidence=3, n_constraints=3),
                 inst("i3", group=PLANNING, n_evidence=2, n_constraints=2, n_dynamic=1)]
    probes = make_qa_probes(instances)
    rows = []
    for agent, base in (("a", 10.0), ("b", 50.0)):
        for i in instances + probes:
            rows.append(row(agent, "J", i.instance_id, base + (20 if i.payload["action_type"] == "qa" else 0),
                            group=i.group))
    out = analyze(frame(rows), instances + probes, {})
    figs = {k: v for k, v in out.items() if isinstance(v, Figure)}
    assert set(figs) == {"fig_domains", "fig_by_evidence", "fig_by_preferences", "fig_static_vs_dynamic",
                         "fig_qa_vs_task"}
    ax = figs["fig_by_evidence"].axes[0]
    assert len(ax.get_lines()) == 2 and len(ax.get_lines()[0].get_xdata()) == 3  # buckets 1, 2, 3
    from matplotlib.container import BarContainer, ErrorbarContainer

    windows = figs["fig_by_preferences"].axes[0]
    assert len([ln for ln in windows.get_lines() if ln.get_marker() == "o"]) == 2  # one line per system
    bars_of = [c for c in windows.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars_of) == 2  # each system's line has its intervals (issue 42)
    ci = out["by_preferences_ci"]
    table = out["by_preferences"]
    for _, r in ci.reset_index().iterrows():  # each bar's interval holds its point
        assert r["ci_low"] <= table.loc[r["system"], r["window"]] <= r["ci_high"]
    domains = figs["fig_domains"].axes[0]

    bars = [c for c in domains.containers if isinstance(c, BarContainer)]
    assert len(bars) == 2 and all(len(c) == 2 for c in bars)  # 2 systems x 2 domains
    assert sum(isinstance(c, ErrorbarContainer) for c in domains.containers) == 2  # each series has error bars
    qa = figs["fig_qa_vs_task"].axes[0]
    assert len(qa.containers) == 2 and all(len(c) == 2 for c in qa.containers)  # QA, Task x 2 systems
    assert out["qa_vs_task"]["Gap"].tolist() == [20, 20]
    for fig in figs.values():
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


def test_constructed_data_runs_end_to_end():
    from perseval.benchmarks.iba.benchmark import IbaBenchmark

    data = IbaBenchmark({"noise_per_evidence": 1}).build(sample=12, seed=3, source=None)
    instances = data.instances + make_qa_probes(data.instances)
    rows = [row(agent, judge, i.instance_id, float((k * 37 + len(agent)) % 101), group=i.group)
            for agent in ("rag", "oracle") for judge in ("J1", "J2") for k, i in enumerate(instances)]
    out = analyze(frame(rows), instances, {})
    for name in ("table4_mean_over_judges", "table_judge_J1", "table_judge_J2", "by_evidence", "by_preferences",
                 "qa_vs_task", "fig_domains", "fig_by_evidence", "fig_by_preferences", "fig_qa_vs_task"):
        assert name in out, name
    assert out["table4_mean_over_judges"]["n"].tolist() == [12, 12]


# --- rule-scored slots in every LLM judge's table ---------------------------------------------------------


def test_rule_scored_slots_join_each_llm_judges_view():
    """CallAPI slots are scored by the rule judge alone (its own rows, under its own name); each LLM
    judge's table covers them too, so Table 4 still averages judges over every instance."""
    instances = [inst("g1"), inst("a1", action_type="call_api")]
    rows = [row("rag", "J1", "g1", 100.0), row("rag", "J2", "g1", 0.0), row("rag", "J2", "g1", 50.0, judge_repeat=1),
            row("rag", "iba.slots", "a1", 40.0)]
    df = frame(rows).assign(judge_model=["m1", "m2", "m2", "-"])
    out = analyze(df, instances, {})
    assert "table_judge_iba.slots" not in out
    assert out["table_judge_J1"].loc["rag (m, r)", "Overall"] == pytest.approx((100 + 40) / 2)
    assert out["table_judge_J2"].loc["rag (m, r)", "Overall"] == pytest.approx((25 + 40) / 2)
    assert out["table4_mean_over_judges"].loc["rag (m, r)", "Overall"] == pytest.approx((70 + 32.5) / 2)
    # the std over J2's repeats is J2's own: repeat 0 -> (0 + 40) / 2, repeat 1 -> (50 + 40) / 2
    assert out["table9_std_over_repeats_J2"].loc["rag (m, r)", "Overall"] == pytest.approx(
        statistics.stdev([20.0, 45.0]))
    only_rule = analyze(frame([row("rag", "iba.slots", "a1", 40.0)]).assign(judge_model="-"), instances, {})
    assert only_rule["table4_mean_over_judges"].loc["rag (m, r)", "Overall"] == pytest.approx(40.0)


# --- error bars (issue 20) and Table 9 / Table 10 as the paper prints them (issue 19) -------------------


def test_table9_in_the_papers_mean_plus_minus_std_cells():
    rows = []
    for jr, (w, p) in enumerate([(25.0, 50.0), (100.0, 0.0), (0.0, 100.0)]):
        rows += [row("a", "Q4", "i1", w, judge_repeat=jr), row("a", "Q4", "i3", p, judge_repeat=jr, group=PLANNING)]
    t9 = analyze(frame(rows), [], {})["table9_Q4"]
    writing, planning, overall = [25, 100, 0], [50, 0, 100], [37.5, 50, 50]
    cell = lambda v: f"{statistics.mean(v):.1f} ± {statistics.stdev(v):.1f}"  # noqa: E731
    cells = [cell(writing), cell(planning), cell(overall)]
    assert t9.loc["a (m, r)", ["Writing", "Plan.", "Overall"]].tolist() == cells
    assert t9.loc["a (m, r)", "repeats"] == 3


def test_table10_per_domain_and_its_paired_differences():
    from perseval.metrics.uncertainty import paired_difference

    bge = [40.0, 60.0, 20.0, 80.0, 50.0, 30.0, 70.0, 90.0, 10.0, 60.0, 40.0, 50.0]
    mpnet = [50.0, 60.0, 40.0, 90.0, 40.0, 50.0, 80.0, 90.0, 30.0, 70.0, 40.0, 70.0]
    rows = []
    for k, (b, m) in enumerate(zip(bge, mpnet)):
        group = WRITING if k % 2 else PLANNING
        rows += [row("rag", "J", f"i{k}", b, retriever="bge", group=group),
                 row("rag", "J", f"i{k}", m, retriever="mpnet", group=group)]
    rows.append(row("other", "J", "i0", 30.0, retriever="bge"))
    out = analyze(frame(rows), [], {})
    by_domain = out["table10_retriever_swap_by_domain"]
    w = [k for k in range(12) if k % 2]
    assert by_domain.loc[("rag (m)", "bge"), "Writing"] == pytest.approx(statistics.mean(bge[k] for k in w))
    assert by_domain.loc[("rag (m)", "Δ mpnet"), "Writing"] == pytest.approx(
        statistics.mean(mpnet[k] - bge[k] for k in w))
    assert by_domain.loc[("rag (m)", "Δ mpnet"), "Overall"] == out["table10_retriever_swap"].loc["rag (m)", "Δ mpnet"]
    ci = out["table10_retriever_swap_ci"].loc["rag (m, mpnet)"]
    d = paired_difference(mpnet, bge, [f"i{k}" for k in range(12)])  # users unknown: each instance its own
    assert ci["against"] == "rag (m, bge)" and ci["Δ"] == pytest.approx(d.mean)
    assert (ci["ci_low"], ci["ci_high"], ci["p (Holm)"]) == pytest.approx((d.ci_low, d.ci_high, d.p_value))
    t4 = out["table4_mean_over_judges_ci"].reset_index()
    overall = t4[(t4["system"] == "rag (m, bge)") & (t4["domain"] == "Overall")].iloc[0]
    assert overall["mean"] == pytest.approx(statistics.mean(bge)) and overall["n_users"] == 12
    assert overall["ci_low"] < overall["mean"] < overall["ci_high"]
