"""Human labels of judged items, and the judge's scores of the same items (docs/judge-labels.md).

A labels CSV is long or wide:
  long  columns `instance_id`, `human`, and optionally `item_id` (the judgment's item as in the judge
        Parquet: a checkpoint id, a Bespoke criterion, a slot), `criterion` (the name to report it under;
        default the item id), `agent` (whose output was labelled; needed when several agents were judged
        on the instance) and `user_id` (the unit the bootstrap resamples; default the instance's user);
  wide  `instance_id` (optionally `agent`, `user_id`) and one column per criterion, each an item id
        (the layout of `perseval iba agreement`'s CSVs: reasonableness, coherence, persona_consistency).
Values are numbers on the judge's own scale (0/1 for binary judges; yes/no and true/false read as 1/0;
Bespoke criteria 1..5); an empty cell is not labelled and is left out.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from perseval.core import files
from perseval.core.errors import InputError
from perseval.metrics.validity import Pairs
from perseval.core.instances import Instance, Judgment

ID_COLUMNS = ("instance_id", "agent", "user_id")
LONG_COLUMNS = ("instance_id", "human", "item_id", "criterion", "agent", "user_id")
_WORDS = {"yes": 1.0, "y": 1.0, "true": 1.0, "t": 1.0, "no": 0.0, "n": 0.0, "false": 0.0, "f": 0.0}


@dataclass(frozen=True)
class Label:
    instance_id: str
    item_id: str
    criterion: str
    human: float
    agent: str | None = None
    user_id: str | None = None


def _value(text: str, path: Path, row: int, col: str) -> float | None:
    t = (text or "").strip().lower()
    if not t:
        return None
    if t in _WORDS:
        return _WORDS[t]
    try:
        return float(t)
    except ValueError:
        raise InputError(path, f"label {text!r} is not a number (or yes/no, true/false; empty = not labelled)",
                         row=row, field=col) from None


def read_labels(path: str | Path) -> list[Label]:
    """The labels of a long or wide CSV (see the module doc); InputError names the row and column."""
    path = Path(path)
    names, records = files.csv_rows(path, first_row=2)  # a bad byte or cell names its row; row 1 is the header
    rows = [rec for _, rec in records]
    header = [h.strip() for h in (names if rows else [])]
    if "instance_id" not in header:
        raise InputError(path, f"missing column 'instance_id'; expected a long layout ({', '.join(LONG_COLUMNS)}) "
                               "or a wide one (instance_id and one column per criterion)", row=1, field="instance_id")
    long = "human" in header
    out: list[Label] = []
    for n, rec in enumerate(rows, start=2):
        rec = {k.strip(): (v or "") for k, v in rec.items() if k}
        iid = rec["instance_id"].strip()
        if not iid:
            raise InputError(path, "empty instance_id", row=n, field="instance_id")
        agent, user = rec.get("agent", "").strip() or None, rec.get("user_id", "").strip() or None
        if long:
            human = _value(rec["human"], path, n, "human")
            item = rec.get("item_id", "").strip() or rec.get("criterion", "").strip()
            if not item:
                raise InputError(path, "a long-layout row needs `item_id` or `criterion`", row=n, field="item_id")
            if human is not None:
                out.append(Label(iid, item, rec.get("criterion", "").strip() or item, human, agent, user))
            continue
        for col in header:
            if col not in ID_COLUMNS:
                human = _value(rec.get(col, ""), path, n, col)
                if human is not None:
                    out.append(Label(iid, col, col, human, agent, user))
    if not out:
        raise InputError(path, "no labelled value: every label cell is empty")
    return out


def judge_scores(judgments: Iterable[Judgment], judge_name: str) -> dict[tuple[str, str, str], list[float]]:
    """(instance_id, item_id, agent) -> the scored values of one judge (every agent and judge repeat)."""
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for j in judgments:
        if j.judge == judge_name and j.status == "scored" and j.score is not None:
            out[(j.instance_id, j.item_id, j.agent)].append(float(j.score))
    return out


def label_pairs(labels: Sequence[Label], scores: Mapping[str, Mapping[tuple[str, str, str], list[float]]],
                users: Mapping[str, str], where: str) -> list[Pairs]:
    """Per (judge, criterion): the judge's mean score beside the human label of every labelled item the
    judge scored. A label that matches the outputs of several agents must name its `agent`."""
    grouped: dict[tuple[str, str], Pairs] = {}
    for judge_name, by_item in scores.items():
        agents_of: dict[tuple[str, str], set[str]] = defaultdict(set)
        for iid, item, agent in by_item:
            agents_of[(iid, item)].add(agent)
        for lab in labels:
            agents = agents_of.get((lab.instance_id, lab.item_id), set())
            if lab.agent is None and len(agents) > 1:
                raise InputError(where, f"instance {lab.instance_id!r} item {lab.item_id!r} was judged for agents "
                                        f"{sorted(agents)}: give the labelled one in an `agent` column", field="agent")
            agent = lab.agent or next(iter(agents), None)
            values = by_item.get((lab.instance_id, lab.item_id, agent or ""), [])
            if not values:
                continue
            p = grouped.setdefault((judge_name, lab.criterion), Pairs(judge_name, lab.criterion, [], [], []))
            p.judge.append(sum(values) / len(values))
            p.human.append(lab.human)
            p.clusters.append(lab.user_id or users.get(lab.instance_id, lab.instance_id))
    return list(grouped.values())


def file_pairs(labels: Sequence[Label], judge_labels: Sequence[Label], judge_name: str) -> list[Pairs]:
    """A judge's labels in a second file of the same layout (e.g. the IBA validation labeller's CSV)."""
    theirs = {(j.instance_id, j.item_id, j.agent): j.human for j in judge_labels}
    grouped: dict[str, Pairs] = {}
    for lab in labels:
        v = theirs.get((lab.instance_id, lab.item_id, lab.agent))
        if v is not None:
            p = grouped.setdefault(lab.criterion, Pairs(judge_name, lab.criterion, [], [], []))
            p.judge.append(v)
            p.human.append(lab.human)
            p.clusters.append(lab.user_id or lab.instance_id)
    return list(grouped.values())


def instance_users(instances: Iterable[Instance]) -> dict[str, str]:
    return {i.instance_id: i.user_id for i in instances}
