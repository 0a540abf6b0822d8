"""`perseval compare` with error bars: each cell's difference between runs (or to a baseline agent's cell
within a run), with its interval, a Holm-corrected p-value and the verdict at the n it rests on.

The instance scores come from each cell's MLflow child run (its `parquet/score` artifacts, which carry
every score's user). Two cells are compared paired when they were scored on the same instances (the same
data key); otherwise unpaired, and the table says so. Runs logged before scores carried their users
have no clusters: their instances count as independent, and the table says that too.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.tracking import MlflowClient

from perseval.report.comparisons import compare_values, difference_mde, instance_values, pick_baseline
from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.uncertainty import Difference, holm, users_needed
from perseval.report.record import download_record
from perseval.report.tracking import mlflow_key

SCORE_ARTIFACTS = "parquet/score"


@dataclass
class CellRun:
    """One cell's child run: what it is, and (read on demand) its instance values of the headline metric."""

    run: Any
    client: MlflowClient

    @property
    def tags(self) -> dict[str, str]:
        return self.run.data.tags

    @property
    def name(self) -> str:
        return self.tags.get("perseval.cell", self.run.info.run_name)

    @property
    def control(self) -> str | None:
        """The control this run is of (swapped-history), None for a plain cell (runs logged before the tag:
        from the name's bracket)."""
        tag = self.tags.get("perseval.control")
        if tag is not None:
            return None if tag == "-" else tag
        return self.name.split(" [", 1)[1].rstrip("]") if " [" in self.name else None

    @property
    def metric(self) -> str:
        return self.tags.get("perseval.headline_metric", "")

    def tag(self, key: str) -> str:
        return self.tags.get(f"perseval.{key}", "-")

    def attrs(self) -> dict[str, str | None]:
        return {"backbone": self.tag("backbone"), "retriever": self.tag("retriever")}

    @cached_property
    def values(self) -> pd.DataFrame | None:
        """instance_id -> (user_id, value); None when the run logged no score Parquet."""
        return _read_values(self.client, self.run.info.run_id, self.metric)


def _read_values(client: MlflowClient, run_id: str, metric: str) -> pd.DataFrame | None:
    if not [f for f in client.list_artifacts(run_id, SCORE_ARTIFACTS) if f.path.endswith(".parquet")]:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(client.download_artifacts(run_id, SCORE_ARTIFACTS, tmp))
        frame = pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))], ignore_index=True)
    # the tag holds MLflow's spelling of the metric (hit@1 -> hit_at_1): find the score's own name
    own = next((m for m in frame["metric"].unique() if mlflow_key(m) == metric), metric)
    values = instance_values(frame, own)
    if (values["user_id"].fillna("") == "").all():  # logged before scores carried users: no clusters
        values = values.assign(user_id=values.index, clusters_known=False)
    return values


def cell_runs(client: MlflowClient, parent: Any) -> dict[str, CellRun]:
    found = client.search_runs([parent.info.experiment_id],
                               filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'", max_results=5000)
    return {c.name: c for c in (CellRun(r, client) for r in found)}


def _difference(a: CellRun, b: CellRun, statistics: StatisticsSettings) -> tuple[Difference | None, str]:
    """a - b and a note ("" / "unpaired" / "no instance scores" / "no user ids: instances as clusters")."""
    va, vb = a.values, b.values
    if va is None or vb is None:
        return None, "no instance scores logged"
    paired = a.tag("data_key") == b.tag("data_key") != "-"
    d = compare_values(va, vb, statistics, paired)
    notes = [] if paired else ["unpaired: different instances"]
    if "clusters_known" in va or "clusters_known" in vb:
        notes.append("no user ids: instances as clusters")
    return d, "; ".join(notes)


def verdict(d: Difference | None, p_holm: float | None, alpha: float = 0.05) -> str:
    if d is None or d.mean is None:
        return ""
    mde, _ = difference_mde(d)
    at = f"n = {d.n_users} users" + (f", MDE {mde:.1f}" if mde is not None else ", no MDE (no variation)")
    if p_holm is not None and p_holm < alpha:
        return f"significant at {at}"
    return f"not significant at {at}"


Pair = tuple[str, str, CellRun, CellRun]  # (label, against, a, b): a - b


def differences(pairs: list[Pair], statistics: StatisticsSettings, detect: float | None = None) -> pd.DataFrame:
    """One row per pair: a - b with its interval, the p-value Holm-corrected across all the pairs, and the
    verdict at its n; with `detect`, the users a study would need to detect a difference of that size
    (80% power, alpha 0.05), this comparison's paired SE taken as the pilot's."""
    results = [(label, against, *_difference(a, b, statistics)) for label, against, a, b in pairs]
    adjusted = holm([d.p_value if d else None for _, _, d, _ in results])
    rows = []
    for (label, against, d, note), p in zip(results, adjusted):
        rows.append({"cell": label, "against": against, "Δ": d.mean if d else None,
                     "ci_low": d.ci_low if d else None, "ci_high": d.ci_high if d else None,
                     "p (Holm)": p, "n_users": d.n_users if d else None, "mde": difference_mde(d)[0],
                     "paired": d.paired if d else None, "verdict": verdict(d, p), "note": note})
        if detect is not None:
            rows[-1][f"users for Δ {detect:g}"] = users_needed(d.se, d.n_users, detect) \
                if d and difference_mde(d)[0] is not None and d.n_users >= 2 else None
    columns = ["cell", "against", "Δ", "ci_low", "ci_high", "p (Holm)", "n_users", "mde", "paired", "verdict", "note"]
    frame = pd.DataFrame(rows, columns=columns + ([f"users for Δ {detect:g}"] if detect is not None else []))
    if detect is not None:  # whole users, blank where no SE says how many (never a float "362.0")
        frame[f"users for Δ {detect:g}"] = frame[f"users for Δ {detect:g}"].astype("Int64")
    return frame


def run_pairs(client: MlflowClient, parents: list[Any]) -> list[Pair]:
    """Each cell of each later run against the same cell in the first run."""
    if len(parents) < 2:
        return []
    first = cell_runs(client, parents[0])
    pairs = []
    for p in parents[1:]:
        for name, cell in sorted(cell_runs(client, p).items()):
            if name in first and cell.metric == first[name].metric:
                pairs.append((f"{name} ({cell.metric})", f"{parents[0].info.run_id[:8]} -> {p.info.run_id[:8]}",
                              cell, first[name]))
    return pairs


def within_pairs(client: MlflowClient, parent: Any, baseline: str) -> list[Pair]:
    """Within one run: each cell against the cell of agent `baseline` of the same benchmark and judge (and
    the same backbone and retriever where the baseline has them: perseval.report.comparisons.pick_baseline)."""
    cells = cell_runs(client, parent)
    pairs = []
    for name, cell in sorted(cells.items()):
        if cell.tag("agent") == baseline:
            continue
        base = pick_baseline(cell.attrs(), [(c.attrs(), c) for c in cells.values() if c.tag("agent") == baseline
                                            and c.control == cell.control  # a control against its own kind
                                            and c.tag("benchmark") == cell.tag("benchmark")
                                            and c.tag("judge") == cell.tag("judge")])
        if base is not None and base.metric == cell.metric:
            pairs.append((f"{name} ({cell.metric})", f"{base.name} in {parent.info.run_id[:8]}", cell, base))
    return pairs


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The differences as a reader sees them: "+3.1 [-8.0, +14.2]", p to two places, the verdict."""
    def delta(r: pd.Series) -> str:
        if r["Δ"] is None or r["Δ"] != r["Δ"]:
            return ""
        ci = f" [{r['ci_low']:+.1f}, {r['ci_high']:+.1f}]" if r["ci_low"] == r["ci_low"] and r["ci_low"] is not None \
            else ""
        return f"{r['Δ']:+.1f}{ci}"

    def p(value: Any) -> str:
        return "" if value is None or value != value else f"{value:.2f}" if value >= 0.01 else f"{value:.0e}"

    out = pd.DataFrame({"cell": frame["cell"], "against": frame["against"],
                        "Δ [CI]": [delta(r) for _, r in frame.iterrows()], "p (Holm)": frame["p (Holm)"].map(p),
                        "verdict": frame["verdict"], "note": frame["note"]})
    for col in (c for c in frame.columns if c.startswith("users for")):
        out[col] = frame[col].map(lambda v: "" if pd.isna(v) else f"{int(v)}")
    return out.set_index("cell")


# ---- the terminal's side-by-side table -------------------------------------------------------------------

@dataclass
class Scored:
    """A cell's headline score in one run, with its interval and the users it rests on (None: not logged)."""

    score: float | None
    ci_low: float | None
    ci_high: float | None
    n_users: float | None
    costs: dict[str, float]


PARTS = ("benchmark", "agent", "backbone", "retriever", "judge")


def scored_cells(client: MlflowClient, parents: list[Any], cost: bool = False) -> list[dict[str, Any]]:
    """One entry per cell (a control cell too) of any of the runs: its identity, headline metric and, per
    parent run id, its Scored. In the cells' name order."""
    from perseval.report.tracking import COST_METRICS

    cells: dict[str, dict[str, Any]] = {}
    ordered: list[str] = []  # the headline's order, from the runs' records (perseval.report.record)
    for p in parents:
        record = download_record(client, p.info.run_id)
        by_key = {c.key: c for c in record.cells} if record else {}
        ordered += [f"{c.name} ({mlflow_key(c.metric)})" for c in record.cells] if record else []
        for name, c in cell_runs(client, p).items():
            m = c.run.data.metrics
            entry = cells.setdefault(f"{name} ({c.metric})", {
                "cell": name, "metric": c.metric, "runs": {}, "control": c.control,
                **{k: c.tags.get(f"perseval.{k}", name.split("/")[i] if len(name.split("/")) > i else "-")
                   for i, k in enumerate(PARTS)}})
            costs = {k: m[k] for k in COST_METRICS if cost and k in m}
            held = by_key.get(c.tags.get("perseval.score_key", ""))
            entry["runs"][p.info.run_id] = Scored(
                held.estimate.point, held.estimate.low, held.estimate.high, held.estimate.users, costs) if held else \
                Scored(m.get(c.metric), m.get("ci_low"), m.get("ci_high"), m.get("n_users"), costs)
    # the headline's order (from the records; a run logged before records: by name), a control's run right
    # under its cell (its name is the cell's, then " [control]")
    order = {k: i for i, k in enumerate(dict.fromkeys(ordered))}

    def place(k: str) -> tuple[int, str, str, str]:
        base = f"{cells[k]['cell'].split(' [')[0]} ({cells[k]['metric']})"
        return order.get(base, len(order)), base, cells[k]["metric"], cells[k]["control"] or ""

    return [cells[k] for k in sorted(cells, key=place)]
