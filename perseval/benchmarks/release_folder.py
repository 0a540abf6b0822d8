"""A release folder read as two tables, `instances` and `histories` (each JSON Lines or Parquet), row by row,
into a benchmark's records, and sampled.

A `Layout` says how one row of each table becomes a record, what the data's info counts and where the layout
is documented: IBA-Bench's release (perseval.benchmarks.iba.release, docs/iba-release-layout.md) is one, a
user's own data (perseval.benchmarks.custom, docs/custom-data-layout.md) another. Every problem raises
InputError naming the file, the 1-based row and the field, and saying what was expected; nothing is guessed or
skipped.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from perseval.benchmarks.base import BenchmarkData
from perseval.benchmarks.release_rows import HistoryRow, Rows
from perseval.benchmarks.views import PayloadView
from perseval.core import files
from perseval.core.errors import InputError
from perseval.core.instances import Document, Instance, instant

INSTANCES, HISTORIES = "instances", "histories"
SUFFIXES = (".jsonl", ".parquet")


def find_table(folder: Path, stem: str, hint: str) -> Path:
    """`<stem>.jsonl` or `<stem>.parquet` in `folder`: exactly one of them; `hint` says where the layout is."""
    return files.find_table(folder, stem, SUFFIXES, hint, holder="a release folder")


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row number, row as a dict): a JSONL line number, or a Parquet row index + 1."""
    if path.suffix == ".jsonl":
        yield from _jsonl_rows(path)
    else:
        yield from _parquet_rows(path)


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in files.utf8_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not valid JSON: {files.json_problem(exc)}", row=n) from None
        if not isinstance(row, dict):
            raise InputError(path, f"expected a JSON object per line, got {type(row).__name__}", row=n)
        yield n, row


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    with files.open_bytes(path) as fh:  # a file perseval may not read is named so
        try:
            pf = pq.ParquetFile(fh)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise InputError(path, f"cannot read as Parquet: {exc}") from None
        n = 0
        for batch in pf.iter_batches(batch_size=50_000):  # a full-size histories file has ~1.4M rows
            for row in batch.to_pylist():
                n += 1
                yield n, row


def load_histories(path: Path, turn_row: Callable[[Rows, int], HistoryRow]) -> dict[str, list[Document]]:
    """Documents per user, in timestamp order; turn ids unique across the file."""
    by_user: dict[str, list[tuple[str, int, Document]]] = {}
    seen: dict[str, int] = {}
    for n, raw in read_rows(path):
        row = turn_row(Rows(path, n, raw), len(by_user.get(str(raw.get("user_id")), [])))
        if row.doc.doc_id in seen:
            raise InputError(path, f"duplicate turn_id {row.doc.doc_id!r} (first at row {seen[row.doc.doc_id]})",
                             row=n, field="turn_id")
        seen[row.doc.doc_id] = n
        by_user.setdefault(row.doc.owner, []).append((instant(row.doc.timestamp), n, row.doc))
    return {u: [d for _, _, d in sorted(turns, key=lambda t: (t[0], t[1]))] for u, turns in by_user.items()}


class EvidenceCount(PayloadView):
    """How many of the user's history turns carry evidence; None: derived from the history's evidence tags."""

    n_evidence: int | None = None


def load_instances(path: Path, histories: dict[str, list[Document]], hist_path: Path,
                   instance_row: Callable[[Rows], Instance]) -> list[Instance]:
    """Instances in file order: ids unique, every user with history turns, `n_evidence` derived when absent."""
    instances: list[Instance] = []
    seen: dict[str, int] = {}
    for n, raw in read_rows(path):
        rows = Rows(path, n, raw)
        inst = instance_row(rows)
        if inst.instance_id in seen:
            raise InputError(path, f"duplicate instance_id {inst.instance_id!r} (first at row "
                                   f"{seen[inst.instance_id]})", row=n, field="instance_id")
        seen[inst.instance_id] = n
        docs = histories.get(inst.user_id)
        if not docs:
            raise InputError(path, f"user {inst.user_id!r} has no turns in {hist_path.name}", row=n, field="user_id")
        if EvidenceCount.of(inst, str(path)).n_evidence is None:  # derive from the history's evidence tags
            inst = replace(inst, payload={**inst.payload, "n_evidence": sum(1 for d in docs if d.meta.get("supports"))})
        instances.append(inst)
    if not instances:
        raise InputError(path, "no instance rows")
    return instances


Info = Callable[[Path, list[Instance], list[Document], int], dict[str, Any]]  # (folder, instances, docs, users)


@dataclass(frozen=True)
class Layout:
    """How one row of each table becomes a record, what the data's info counts, and where the layout is
    documented (the hint every missing-table error gives)."""

    instance_row: Callable[[Rows], Instance]
    turn_row: Callable[[Rows, int], HistoryRow]
    info: Info
    hint: str

    def load(self, source: Path) -> BenchmarkData:
        """Every instance of a release folder and the histories of their users, checked row by row."""
        folder = Path(source)
        inst_path, hist_path = find_table(folder, INSTANCES, self.hint), find_table(folder, HISTORIES, self.hint)
        histories = load_histories(hist_path, self.turn_row)
        instances = load_instances(inst_path, histories, hist_path, self.instance_row)
        used = {i.user_id for i in instances}
        documents = [d for u, docs in histories.items() if u in used for d in docs]
        return BenchmarkData(instances, documents, self.info(folder, instances, documents, len(histories)))

    def sample(self, data: BenchmarkData, sample: int, seed: int) -> BenchmarkData:
        """`sample` instances of a loaded release, seeded, in file order, with only their users' histories.

        The choice is the first `sample` of one seeded shuffle, so a larger sample extends a smaller one
        with the same seed; a sample at least the release's size keeps every instance.
        """
        n = len(data.instances)
        order = list(range(n))
        random.Random(seed).shuffle(order)
        chosen = [data.instances[i] for i in sorted(order[:sample])]
        users = {i.user_id for i in chosen}
        documents = [d for d in data.documents if d.owner in users]
        info = self.info(Path(data.info["source"]), chosen, documents, data.info["n_users_in_histories"])
        return BenchmarkData(chosen, documents, {**info, "n_instances_in_release": n, "sample": sample, "seed": seed})
