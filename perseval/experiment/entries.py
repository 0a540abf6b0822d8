"""What a benchmark entry is called: the one name its cells, costs, tables, MLflow runs and traces carry.

An entry is its benchmark's name while it is the only unlabelled entry of that benchmark (so a single entry
keeps the names it always had). Two entries of one benchmark are told apart by the `label:` a user sets
(`prefeval:generation`), and an unlabelled one by a short digest of what makes its data differ (sample, seed,
source and params: `prefeval:3f9a1c`). `perseval validate` refuses cells that would still share a name
(perseval.experiment.checks).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from perseval.core.hashing import content_key
from perseval.experiment.config import BenchmarkEntry

DIGEST_LENGTH = 6


def params_digest(entry: BenchmarkEntry) -> str:
    """A short digest of what an entry's data depends on (its agents and judges are in its cells' names)."""
    return content_key(entry.sample, entry.seed, entry.source, entry.params, length=DIGEST_LENGTH)


def entry_ids(entries: Sequence[BenchmarkEntry]) -> list[str]:
    """Each entry's name as its cells show it: `<benchmark>`, `<benchmark>:<label>` or `<benchmark>:<digest>`."""
    unlabelled = Counter(e.name for e in entries if e.label is None)
    return [f"{e.name}:{e.label}" if e.label is not None else
            e.name if unlabelled[e.name] == 1 else f"{e.name}:{params_digest(e)}" for e in entries]
