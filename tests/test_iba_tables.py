"""IBA Tables 2 and 13 as `perseval stats` shows them, counted by hand on a small set of instances."""
from __future__ import annotations

from perseval.benchmarks.base import build_all
from perseval.benchmarks.iba.qa import QA_ACTION
from perseval.benchmarks.iba.tables import domain_table, scenario_table
from perseval.experiment.components import make_benchmark
from perseval.core.instances import Instance


def _inst(i: int, domain: str, scenario: str, prefs: list[tuple[str, str, str | None]], n_evidence: int,
          action: str = "generate") -> Instance:
    preferences = [{"dimension": d, "value": v, "previous": prev, "dynamic": prev is not None} for d, v, prev in prefs]
    return Instance(f"i{i}", "iba", f"u{i}", domain, "q", {
        "scenario": scenario, "action_type": action, "n_evidence": n_evidence, "n_constraints": len(prefs),
        "dynamic": any(prev for *_, prev in prefs)}, {"preferences": preferences})


INSTANCES = [
    _inst(1, "Work", "Email", [("tone", "formal", None), ("length", "short", None)], 1),
    _inst(2, "Work", "Email", [("tone", "casual", "formal")], 6),  # a shift: formal -> casual
    _inst(3, "Work", "Slides", [("theme", "dark", None)], 2, action="call_api"),
    _inst(4, "Planning", "Trips", [("seat", "aisle", None), ("meal", "veg", None), ("bag", "none", None)], 5),
    _inst(5, "Planning", "Trips", [("seat", "aisle", None)], 3, action=QA_ACTION),  # a probe: not counted
]


def test_table13_counts_dimensions_values_and_shifts_per_scenario():
    t = scenario_table(INSTANCES).set_index("scenario")
    # Email: dimensions tone, length; values formal, short, casual (the shift's earlier value is formal)
    assert t.loc["Email", ["D", "P", "I", "Dyn.", "action"]].tolist() == [2, 3, 2, "yes", "generate"]
    assert t.loc["Slides", ["D", "P", "I", "Dyn.", "action"]].tolist() == [1, 1, 1, "no", "call_api"]
    assert t.loc["Trips", ["D", "P", "I"]].tolist() == [3, 3, 1]  # the probe is left out


def test_table2_rows_sum_to_their_instances_and_overall_adds_up():
    t = domain_table(INSTANCES)
    work = t.loc["Work"]
    assert (work["S"], work["D"], work["P"], work["I"]) == (2, 3, 2, 3)  # P: int(mean(3, 1)) = 2
    assert [work[f"#evidence {b}"] for b in ("1", "2", "3", "4", "5+")] == [1, 1, 0, 0, 1]
    assert [work[f"#constraints {b}"] for b in ("1", "2", "3", "4", "5+")] == [2, 1, 0, 0, 0]
    overall = t.loc["Overall"]
    assert overall["I"] == 4 and overall["S"] == 3 and overall["D"] == 6
    for label in ("evidence", "constraints"):
        assert (t[[c for c in t.columns if c.startswith(f"#{label}")]].sum(axis=1) == t["I"]).all()


def test_stats_of_a_table2_build_follow_the_papers_evidence_shape():
    bench = make_benchmark("iba", {"distribution": "table2", "qa_probes": True})
    data = build_all(bench, sample=40, seed=3, source=None)
    tables = bench.stats(data.instances, data.documents)
    t2, t13 = tables["table2_domains"], tables["table13_scenarios"]
    assert t2.loc["Overall", "I"] == 40 == t13["I"].sum()  # probes (as many again) are not counted
    assert t2.loc["Overall", "S"] == len(t13) and (t13["D"] >= 1).all() and (t13["P"] >= t13["D"]).all()
    # Table 2's overall row has most instances at one or two evidence items; a table2 build keeps that
    ev = [t2.loc["Overall", f"#evidence {b}"] for b in ("1", "2", "3", "4", "5+")]
    assert ev[0] + ev[1] > ev[2] + ev[3] + ev[4]
