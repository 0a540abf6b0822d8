"""Small pandas frames as terminal tables (dataset statistics, differences, judge agreement): a cell wraps
inside its column, never a row across lines; a tuple index or column (a groupby's) reads "a / b"; counts as
integers, other numbers to two places."""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd
from rich import box
from rich.table import Table
from rich.text import Text

from perseval.report.views.text import value_text


def _label(value: Any) -> str:
    return " / ".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


def _numeric(column: Any) -> bool:
    return bool(pd.api.types.is_numeric_dtype(column)) and not pd.api.types.is_bool_dtype(column)


def frame_table(frame: pd.DataFrame, title: str, whole: Iterable[str] = ()) -> Table:
    """`frame` (index shown first) as a table; the `whole` columns never wrap (a number with its interval)."""
    whole = set(whole)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    names = frame.index.names if len(frame.index.names) > 1 else [frame.index.name]
    table.add_column(" / ".join(str(n) for n in names if n is not None), no_wrap=True)
    for col in frame.columns:
        table.add_column(_label(col), justify="right" if _numeric(frame[col]) or col in whole else "left",
                         no_wrap=col in whole)
    for idx, row in frame.iterrows():
        table.add_row(Text(_label(idx)), *[Text(value_text(v)) for v in row])
    return table


AGREEMENT_COLUMNS = ("judge", "criterion", "n", "clusters", "pearson", "spearman", "kappa", "kappa_ci_low",
                     "kappa_ci_high", "alpha", "alpha_level", "alpha_ci_low", "alpha_ci_high")


def agreement_markdown(table: pd.DataFrame) -> str:
    """A judge's agreement with human labels (perseval.report.analyses.judge_agreement) as Markdown."""
    return table[[c for c in AGREEMENT_COLUMNS if c in table]].to_markdown(index=False, floatfmt=".3f")
