"""The IBA validation sample (appendix B.1) as files: what `perseval iba label-sample` writes.

A seeded sample of the built instances, an empty label file per sample for human raters (the layout
`perseval iba agreement` reads) with the instance views they label from, and, with a model, one label
file per judge repeat, so that a judge's labels are compared with a human's, or with its own repeat,
by the same command.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from perseval.benchmarks.iba.judges.validation import instance_view, label_instances
from perseval.benchmarks.iba.validation import DIMENSIONS, LabelSet, sample_for_validation, write_label_csv
from perseval.llm.base import ChatModel
from perseval.core.instances import Document, Instance


@dataclass
class LabelSample:
    instances: list[Instance]
    documents: dict[str, list[Document]]  # owner -> history


def pick(instances: Sequence[Instance], documents: Sequence[Document], n: int, seed: int) -> LabelSample:
    picked = sample_for_validation(instances, n=n, seed=seed)
    owners = {i.user_id for i in picked}
    by_owner: dict[str, list[Document]] = defaultdict(list)
    for d in documents:
        if d.owner in owners:
            by_owner[d.owner].append(d)
    return LabelSample(picked, dict(by_owner))


def write_for_raters(sample: LabelSample, out_dir: Path, name: str) -> list[Path]:
    """`<name>_to_label.csv` (every label empty) and `<name>_views.md` (what a rater reads per instance)."""
    empty = LabelSet(name, {i.instance_id: {d: None for d in DIMENSIONS} for i in sample.instances})
    template = write_label_csv(empty, out_dir / f"{name}_to_label.csv")
    views = out_dir / f"{name}_views.md"
    views.write_text("".join(f"## {i.instance_id}\n\n{instance_view(i, sample.documents.get(i.user_id, []))}\n\n"
                             for i in sample.instances), encoding="utf-8")
    return [template, views]


async def write_judge_labels(model: ChatModel, sample: LabelSample, out_dir: Path, name: str,
                             repeats: int) -> list[Path]:
    """One label file per judge repeat (`<name>_<model>_<r>.csv`): unparsed and failed labels are empty."""
    paths = []
    for r in range(repeats):
        labels = await label_instances(model, sample.instances, sample.documents, repeat=r)
        paths.append(write_label_csv(labels, out_dir / f"{name}_{model.name}_{r}.csv"))
    return paths
