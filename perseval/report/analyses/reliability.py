"""Judges checked against each other and themselves, with no human label: one row per judge and run.

- inter-judge: where several LLM judges scored the same run's items (IBA's three judges), Krippendorff's
  alpha over the judges (raters) x items (units, one per judge repeat: the k-th rating of each judge, as
  given, never repeats averaged into fractions) and the share of items on which they disagree;
- self-consistency: with judge repeats, alpha over the repeats of one judge on the same items;
- length bias: Spearman's rho of a judge's instance score with the response length (characters);
- self-preference: the judge model and the agent's backbone share a model family (the name before the
  first '-' or '.' of the model's name, e.g. qwen3, smollm2): a judge may favour its own family's text.
Alpha uses the nominal level for binary items and, for graded ones, the level their metric treats them
at (ITEM_LEVELS: averaged ratings interval, ranks ordinal) (perseval.metrics.validity).
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pandas as pd

from perseval.metrics.validity import correlations, krippendorff_alpha
from perseval.pipeline.units import Cell, Plan
from perseval.core.instances import AgentOutput, Judgment
from perseval.core.store import StageStore


def model_family(name: str | None) -> str | None:
    return re.split(r"[-_.:/ ]", name.lower(), maxsplit=1)[0] if name else None


# The level of measurement of a graded item, as its metric treats it: ratings the benchmark averages as
# numbers are interval; a rank is ordinal. Items with two values (pass/fail checks) are nominal.
ITEM_LEVELS = {"criterion": "interval", "evaluator_score": "interval", "rubric": "interval", "rank": "ordinal",
               "ranking": "ordinal"}
Unit = tuple[str, str, int, int]  # (instance, item, agent repeat, judge repeat)


def level(kinds: set[str], values: list[float]) -> str:
    """Nominal for binary items; else the graded items' level (ITEM_LEVELS), interval when unknown."""
    if len(set(values)) <= 2:
        return "nominal"
    levels = {ITEM_LEVELS.get(k, "interval") for k in kinds}
    return "ordinal" if levels == {"ordinal"} else "interval"


def _alpha(table: dict[Any, dict[str, float]], raters: list[str], kinds: set[str] = frozenset()) -> tuple[float | None, int]:
    """Alpha of raters x units (units: items scored by at least two raters) and the number of such units."""
    units = [u for u, by in table.items() if sum(r in by for r in raters) >= 2]
    if not units:
        return None, 0
    rows = [[table[u].get(r) for u in units] for r in raters]
    values = [v for row in rows for v in row if v is not None]
    return krippendorff_alpha(rows, level(kinds, values)), len(units)


def _judgments(root: str, cell: Cell) -> list[Judgment]:
    store = StageStore(root, "judge", cell.judged.key)
    return [j for j in store.read_records(Judgment) if j.status == "scored" and j.score is not None] \
        if store.parts() else []


def reliability_table(plan: Plan, root: str) -> pd.DataFrame:
    """One row per (plain run, LLM judge): the checks above; empty when no LLM judge scored anything."""
    rows = []
    by_run: dict[str, list[Cell]] = defaultdict(list)
    for c in plan.cells:
        if c.run.control is None and c.judged.judge.uses_llm:
            by_run[c.run.key].append(c)
    for cells in by_run.values():
        judged = {c.judge: _judgments(root, c) for c in cells}
        kinds = {j.kind for js in judged.values() for j in js}
        # one unit per judge repeat: each rating as the judge gave it, never averaged into a fraction
        items: dict[Unit, dict[str, float]] = defaultdict(dict)
        for name, js in judged.items():
            for j in js:
                items[(j.instance_id, j.item_id, j.repeat, j.judge_repeat)][name] = float(j.score)
        inter, n_inter = _alpha(items, list(judged), kinds) if len(judged) > 1 else (None, 0)
        disagree = [len({round(v, 6) for v in by.values()}) > 1 for by in items.values() if len(by) > 1]
        run_store = StageStore(root, "run", cells[0].run.key)
        outputs = {(o.instance_id, o.repeat): len(o.text) for o in
                   (run_store.read_records(AgentOutput) if run_store.parts() else [])}
        for c in cells:
            rows.append({"benchmark": c.entry, "run": c.run.label, "judge": c.judge,
                         "judge_model": c.judge_model, "items": len({(j.instance_id, j.item_id, j.repeat)
                                                                     for j in judged[c.judge]}),
                         "inter_judge_alpha": inter, "inter_judge_items": n_inter,
                         "disagreement_share": 100.0 * sum(disagree) / len(disagree) if disagree else None,
                         "self_consistency_alpha": _self_consistency(judged[c.judge]),
                         "length_spearman": _length_bias(judged[c.judge], outputs),
                         "self_preference": model_family(c.judge_model) == model_family(c.backbone)
                         if c.backbone and c.judge_model else None})
    return pd.DataFrame(rows)


def _self_consistency(judgments: list[Judgment]) -> float | None:
    """Alpha over judge repeats (raters) of the same items; None with one repeat."""
    reps = sorted({j.judge_repeat for j in judgments})
    if len(reps) < 2:
        return None
    table: dict[Unit, dict[str, float]] = defaultdict(dict)
    for j in judgments:
        table[(j.instance_id, j.item_id, j.repeat, 0)][str(j.judge_repeat)] = float(j.score)
    return _alpha(table, [str(r) for r in reps], {j.kind for j in judgments})[0]


def _length_bias(judgments: list[Judgment], lengths: dict[tuple[str, int], int]) -> float | None:
    """Spearman's rho of the per-output mean score with the output's length."""
    per: dict[tuple[str, int], list[float]] = defaultdict(list)
    for j in judgments:
        per[(j.instance_id, j.repeat)].append(float(j.score))
    keys = [k for k in per if k in lengths]
    return correlations([sum(per[k]) / len(per[k]) for k in keys], [float(lengths[k]) for k in keys])[1]
