"""Tables that fit the terminal: no number cut, no row wrapped, no line over the width.

A table is a row label (the cell) and groups of columns that belong together (a score with its users, a
difference with its p). It is printed whole where it fits (two spaces between columns, else one); where it
does not, its groups are packed into as few tables as fit, each repeating the row label, so at 80 columns the
same figures come as two or three tables instead of cut ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


@dataclass
class Group:
    """Columns printed together: their labels and, per row, their text; `name`: what a table of this group
    alone is titled after."""

    name: str
    labels: list[str]
    cells: list[list[str]] = field(default_factory=list)  # per row
    left: bool = False  # text columns (a status word) align left


def width_of(table: Table) -> int:
    """The columns `table` takes when nothing is wrapped or cut."""
    return Console(width=1000).measure(table).maximum


def _table(title: str, label: str, rows: Sequence[str], groups: Sequence[Group], ends: Sequence[bool],
           gap: int) -> Table:
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  padding=(0, 0, 0, gap))  # Text: a label such as "lamp-rag [swapped-history]" is not markup
    table.add_column(Text(label), no_wrap=True)
    for g in groups:
        for name in g.labels:
            table.add_column(Text(name), justify="left" if g.left else "right", no_wrap=True)
    for k, row in enumerate(rows):
        table.add_row(Text(row), *[Text(text) for g in groups for text in g.cells[k]],
                      end_section=bool(ends and ends[k]))
    return table


def _fits(title: str, label: str, rows: Sequence[str], groups: Sequence[Group], ends: Sequence[bool],
          width: int) -> Table | None:
    """The table of `groups` at the widest gap that fits (None when none does)."""
    for gap in (1, 0):
        table = _table(title, label, rows, groups, ends, gap)
        if width_of(table) <= width:
            return table
    return None


def fitted(title: str, label: str, rows: Sequence[str], groups: Sequence[Group], width: int,
           ends: Sequence[bool] = (), part_title: str | None = None) -> list[Table]:
    """One table of every group where it fits `width`; else each group in the first table it fits beside (the
    groups of a table in their order), each table titled `<part_title>: <its groups' names>` (default: the
    title). A group too wide alone still gets a table of its own."""
    groups = [g for g in groups if g.labels]
    whole = _fits(title, label, rows, groups, ends, width)
    if whole is not None:
        return [whole]
    packs: list[list[Group]] = []
    for g in groups:
        home = next((p for p in packs if _fits("", label, rows, [*p, g], ends, width) is not None), None)
        if home is None:
            packs.append([g])
        else:
            home.append(g)
    out = []
    for pack in packs:
        name = f"{part_title or title}: {', '.join(g.name for g in pack)}"
        out.append(_fits(name, label, rows, pack, ends, width) or _table(name, label, rows, pack, ends, 0))
    return out
