"""Quality validation of constructed instances (paper appendix B.1): agreement of two label sets.

Two raters (two human annotators via CSV files, or two LLM-judge runs) label N
sampled instances on three binary dimensions; we report raw agreement and
Gwet's AC1 per dimension and overall. AC1 is computed here, not by a library:
`irrCAC` (the maintained PyPI implementation) pins scipy==1.12 and pandas<3,
which the project's stack (numpy 2, pandas 3) cannot install beside it.

AC1 for two raters and q categories: Pa = share of items both raters labelled
alike; pi_k = mean over the two raters of the share of items put in category k;
Pe = sum_k pi_k (1 - pi_k) / (q - 1); AC1 = (Pa - Pe) / (1 - Pe). Unlike Cohen's
kappa its chance term stays small when one label dominates, which is why the
paper uses it for skewed quality labels. An item missing either label is left
out of that dimension and counted as excluded (never read as 0).
"""
from __future__ import annotations

import csv
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from perseval.benchmarks.iba.qa import task_instances
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Instance

DIMENSIONS = ("reasonableness", "coherence", "persona_consistency")
CATEGORIES = (0, 1)
_TRUE = {"1", "yes", "y", "true", "t"}
_FALSE = {"0", "no", "n", "false", "f"}
CELL_LIMIT = 131_072  # characters of one cell: the csv module's usual limit; no instance id or label is longer

Label = int | None


@dataclass
class LabelSet:
    """One rater's labels: instance id -> dimension -> 0, 1 or None (no usable label)."""

    name: str
    labels: dict[str, dict[str, Label]] = field(default_factory=dict)
    unparsed: int = 0  # judge answers that gave no 0/1 (stored as None)
    failed: int = 0  # judge requests that failed (stored as None)
    details: list[dict[str, Any]] = field(default_factory=list)  # raw judge answers, for audit


# --- the statistics -------------------------------------------------------------------------


def raw_agreement(a: Sequence[int], b: Sequence[int]) -> float:
    """P_o: the share of items labelled alike by both raters."""
    if len(a) != len(b) or not a:
        raise ValueError("raw agreement needs two equally long, non-empty label lists")
    return sum(x == y for x, y in zip(a, b)) / len(a)


def gwet_ac1(a: Sequence[int], b: Sequence[int], categories: Sequence[int] = CATEGORIES) -> float:
    """Gwet's AC1 of two raters over the same items (complete pairs only)."""
    pa = raw_agreement(a, b)
    n, q = len(a), len(categories)
    pi = [(sum(x == k for x in a) + sum(y == k for y in b)) / (2 * n) for k in categories]
    pe = sum(p * (1 - p) for p in pi) / (q - 1)
    return (pa - pe) / (1 - pe)  # pe <= (q-1)/q < 1, so this never divides by zero


def paired(a: LabelSet, b: LabelSet, dimension: str) -> tuple[list[int], list[int], int]:
    """The two raters' labels on items both labelled, and how many items were left out."""
    xs, ys, excluded = [], [], 0
    for iid in sorted(set(a.labels) | set(b.labels)):
        x, y = a.labels.get(iid, {}).get(dimension), b.labels.get(iid, {}).get(dimension)
        if x is None or y is None:
            excluded += 1
        else:
            xs.append(x)
            ys.append(y)
    return xs, ys, excluded


def _row(xs: list[int], ys: list[int], excluded: int) -> dict[str, Any]:
    if not xs:
        return {"n": 0, "excluded": excluded, "agreement": None, "ac1": None}
    return {"n": len(xs), "excluded": excluded, "agreement": raw_agreement(xs, ys), "ac1": gwet_ac1(xs, ys),
            "share_1": (sum(xs) + sum(ys)) / (2 * len(xs))}


def agreement_report(a: LabelSet, b: LabelSet, dimensions: Sequence[str] = DIMENSIONS) -> dict[str, Any]:
    """Per dimension and overall: n, excluded, raw agreement, AC1 (Table 11's columns).

    `overall` pools every (item, dimension) pair; `mean_ac1` is the mean of the per-dimension
    AC1 values (with equal n per dimension the pooled agreement equals the mean agreement).
    """
    rows, pool_x, pool_y, pool_ex = {}, [], [], 0
    for dim in dimensions:
        xs, ys, ex = paired(a, b, dim)
        rows[dim] = _row(xs, ys, ex)
        pool_x, pool_y, pool_ex = pool_x + xs, pool_y + ys, pool_ex + ex
    ac1s = [r["ac1"] for r in rows.values() if r["ac1"] is not None]
    return {"raters": [a.name, b.name], "dimensions": rows, "overall": _row(pool_x, pool_y, pool_ex),
            "mean_ac1": sum(ac1s) / len(ac1s) if ac1s else None,
            "unparsed": {a.name: a.unparsed, b.name: b.unparsed}, "failed": {a.name: a.failed, b.name: b.failed}}


# --- sampling and files -----------------------------------------------------------------------


def sample_for_validation(instances: Sequence[Instance], n: int = 200, seed: int = 42) -> list[Instance]:
    """A seeded random sample of n task instances (the paper samples 200), in id order."""
    pool = task_instances(instances)
    picked = random.Random(f"iba-validation:{seed}").sample(pool, min(n, len(pool)))
    return sorted(picked, key=lambda i: i.instance_id)


def _column(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def _label(text: str, path: Path, row: int, col: str) -> Label:
    value = (text or "").strip().lower()
    if value == "":
        return None
    if value in _TRUE:
        return 1
    if value in _FALSE:
        return 0
    raise InputError(path, f"label {text!r} is not 0/1 (or yes/no, true/false; empty = not labelled)",
                     row=row, field=col)


def read_label_csv(path: str | Path, dimensions: Sequence[str] = DIMENSIONS, name: str | None = None) -> LabelSet:
    """A human annotation file: a header with `instance_id` and one column per dimension."""
    path = Path(path)
    # row by row: a line that is not UTF-8, or a cell over the csv module's usual limit (no id is that long),
    # names its row; row 1 is the header
    header_names, rows = files.csv_rows(path, first_row=2, max_field=CELL_LIMIT,
                                        missing="missing: no annotation file at this path")
    header = {_column(h): h for h in header_names}
    for col in ("instance_id", *dimensions):
        if col not in header:
            raise InputError(path, f"missing column {col!r}; expected columns: instance_id, "
                                   f"{', '.join(dimensions)}", row=1, field=col)
    out = LabelSet(name or path.stem)
    for n, rec in rows:
        iid = (rec.get(header["instance_id"]) or "").strip()
        if not iid:
            raise InputError(path, "empty instance_id", row=n, field="instance_id")
        if iid in out.labels:
            raise InputError(path, f"instance {iid!r} is labelled twice", row=n, field="instance_id")
        out.labels[iid] = {d: _label(rec.get(header[d]) or "", path, n, d) for d in dimensions}
    return out


def write_label_csv(labels: LabelSet, path: str | Path, dimensions: Sequence[str] = DIMENSIONS) -> Path:
    """The same layout read_label_csv reads (None -> empty cell): judge labels archived like human ones."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["instance_id", *dimensions])
        for iid in sorted(labels.labels):
            w.writerow([iid, *("" if (v := labels.labels[iid].get(d)) is None else v for d in dimensions)])
    return path
