"""A cell's one name in every view, and cells named the way a person names them.

A cell is labelled by the fewest of its parts that tell it apart within its benchmark: the agent alone when only
one cell has it, else the agent and the judge (then the backbone, then the retriever) - `iba-rag` vs
`iba-no-history` vs `iba-oracle`, or `iba-rag/smollm2-judge` vs `iba-rag/iba.slots`. A control cell is its plain
cell's label and the control in brackets (`lamp-rag [swapped-history]`). The record stores the label, so the
headline, Controls, `compare`, `samples`, the cross-benchmark table, MLflow and the summary JSON all say it.

A person names a cell by its label, its full name (`iba/iba-rag/smollm2-135m/minilm/iba.slots`), a prefix of
that, or some of its parts joined by `/` in any order (`iba-rag`, `iba-rag/iba.slots`); a name that fits no
cell gets the closest names ("did you mean") or the list of the cells.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Sequence

from perseval.core.suggest import closest, suggestion

IDENTITY = ("benchmark", "agent", "backbone", "retriever", "judge")
EXTRA_PARTS = ("judge", "backbone", "retriever")  # tried in this order after the agent


def short_names(identities: Sequence[Sequence[str]]) -> list[str]:
    """Per identity (benchmark, agent, backbone, retriever, judge): the shortest unambiguous name within its
    benchmark, the agent first ("iba-rag", "iba-rag/iba.slots")."""
    by_bench: dict[str, list[int]] = {}
    for k, ident in enumerate(identities):
        by_bench.setdefault(ident[0], []).append(k)
    names = [""] * len(identities)
    for members in by_bench.values():
        parts = _distinguishing([identities[k] for k in members])
        for k in members:
            names[k] = "/".join(identities[k][IDENTITY.index(p)] for p in ("agent", *parts))
    return names


def _distinguishing(group: list[Sequence[str]]) -> tuple[str, ...]:
    """The fewest extra parts (after the agent) that make the group's names distinct."""
    for size in range(len(EXTRA_PARTS) + 1):
        for parts in combinations(EXTRA_PARTS, size):
            cols = [IDENTITY.index(p) for p in ("agent", *parts)]
            if len({tuple(ident[c] for c in cols) for ident in group}) == len(group):
                return tuple(sorted(parts, key=EXTRA_PARTS.index))
    return EXTRA_PARTS


def control_label(label: str, control: str) -> str:
    return f"{label} [{control}]"


# ---- naming cells ---------------------------------------------------------------------------------------------

def _parts(cell: Any) -> tuple[str, ...]:
    return tuple(getattr(cell.parts, p) for p in IDENTITY)


def matches(cell: Any, spec: str) -> bool:
    """Whether `spec` names the cell (a perseval.report.record.CellRecord): its label, its full name, a prefix of
    that, or some of its parts joined by '/' (a control cell only when the spec names its control)."""
    if spec in (cell.label, cell.name) or cell.name.startswith(spec):
        return True
    bare, _, control = spec.partition(" [")
    if (cell.control is not None) != bool(control) or (control and control.rstrip("]") != cell.control):
        return False
    tokens = [t for t in bare.split("/") if t]
    return bool(tokens) and all(t in _parts(cell) for t in tokens)


def _known(cells: Sequence[Any]) -> list[str]:
    return [c.label if sum(o.label == c.label for o in cells) == 1 else f"{c.parts.benchmark}/{c.label}"
            for c in cells]


def did_you_mean(cells: Sequence[Any], spec: str) -> str:
    """The closest name to `spec`: each of its parts that names nothing replaced by the closest part of a cell
    (a typo'd agent or judge), else the closest label; the cells' labels when nothing is close."""
    bare = spec.split(" [")[0]
    tokens = [t for t in bare.split("/") if t]
    parts = {p for c in cells for p in _parts(c)}
    wrong = [t for t in tokens if t not in parts]
    if len(wrong) == 1:  # one typo'd part: the names it may have meant, those that name a cell
        k = tokens.index(wrong[0])
        near = ["/".join([*tokens[:k], p, *tokens[k + 1:]]) for p in closest(wrong[0], parts, n=3, cutoff=0.5)]
        near = [n for n in near if any(matches(c, n) for c in cells)]
        if near:
            return "did you mean " + " or ".join(repr(n) for n in near) + "?"
    return suggestion(spec, _known(cells))


def resolve_cells(cells: Sequence[Any], spec: str) -> list[Any]:
    """The cells `spec` names (exact label or name first); ValueError with 'did you mean' when none."""
    exact = [c for c in cells if spec in (c.label, c.name) or f"{c.parts.benchmark}/{c.label}" == spec]
    found = exact or [c for c in cells if matches(c, spec)]
    if not found:
        raise ValueError(f"{spec!r} names no cell of the run; {did_you_mean(cells, spec)}")
    return found


def resolve_cell(cells: Sequence[Any], spec: str) -> Any:
    """The one cell `spec` names; ValueError naming the cells it fits (or the closest ones) otherwise."""
    found = resolve_cells(cells, spec)
    if len(found) != 1:
        fits = ", ".join(_known(found))
        raise ValueError(f"{spec!r} names {len(found)} cells of the run ({fits}), not one; add the judge or "
                         f"backbone (e.g. {found[0].parts.agent}/{found[0].parts.judge})")
    return found[0]
