"""Loader of an official IBA-Bench release folder (layout: docs/iba-release-layout.md).

The release is not public yet, so the layout is perseval's expectation, kept
close to what construction writes: an instances file (one row per task
instance) and a histories file (one row per history turn), each as JSON Lines
or Parquet. Every problem raises InputError naming the file, the 1-based row
and the field, and saying what was expected; nothing is guessed or skipped.
"""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from perseval.core import files
from perseval.benchmarks.base import BenchmarkData
from perseval.benchmarks.iba.distribution import bucket
from perseval.benchmarks.iba.release_rows import UNSPECIFIED, HistoryRow, Rows, history_row, instance_from_row
from perseval.core.errors import InputError
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.core.instances import Document, Instance, instant

INSTANCES, HISTORIES = "instances", "histories"
SUFFIXES = (".jsonl", ".parquet")
NOT_PUBLIC = ("the official IBA-Bench release is not public yet; lay a release out as docs/iba-release-layout.md "
              "describes, or leave `source` unset to construct the data")


def find_table(folder: Path, stem: str, hint: str = NOT_PUBLIC) -> Path:
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


def load_histories(path: Path,
                   turn_row: Callable[[Rows, int], HistoryRow] = history_row) -> dict[str, list[Document]]:
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


def load_instances(path: Path, histories: dict[str, list[Document]], hist_path: Path,
                   instance_row: Callable[[Rows], Instance] = instance_from_row) -> list[Instance]:
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
        if IbaPayload.of(inst, str(path)).n_evidence is None:  # derive from the history's evidence tags when given
            inst = replace(inst, payload={**inst.payload, "n_evidence": sum(1 for d in docs if d.meta.get("supports"))})
        instances.append(inst)
    if not instances:
        raise InputError(path, "no instance rows")
    return instances


Info = Callable[[Path, list[Instance], list[Document], int], dict[str, Any]]  # (folder, instances, docs, users)


@dataclass(frozen=True)
class Layout:
    """How one row of each table becomes a record, what the data's info counts, and where the layout is
    documented. The IBA release is one layout; the generic layout of a user's own data (perseval.benchmarks.
    custom) is another, read, checked and sampled by the same functions."""

    instance_row: Callable[[Rows], Instance]
    turn_row: Callable[[Rows, int], HistoryRow]
    info: Info
    hint: str


def load_release(source: Path, layout: Layout | None = None) -> BenchmarkData:
    """Instances and histories of a release folder, as construction would have produced them."""
    layout = layout or IBA_LAYOUT
    folder = Path(source)
    inst_path, hist_path = find_table(folder, INSTANCES, layout.hint), find_table(folder, HISTORIES, layout.hint)
    histories = load_histories(hist_path, layout.turn_row)
    instances = load_instances(inst_path, histories, hist_path, layout.instance_row)
    used = {i.user_id for i in instances}
    documents = [d for u, docs in histories.items() if u in used for d in docs]
    return BenchmarkData(instances, documents, layout.info(folder, instances, documents, len(histories)))


def sample_release(data: BenchmarkData, sample: int, seed: int, layout: Layout | None = None) -> BenchmarkData:
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
    info_of = (layout or IBA_LAYOUT).info
    info = info_of(Path(data.info["source"]), chosen, documents, data.info["n_users_in_histories"])
    return BenchmarkData(chosen, documents, {**info, "n_instances_in_release": n, "sample": sample, "seed": seed})


def release_info(folder: Path, instances: list[Instance], documents: list[Document], n_users: int) -> dict:
    n_evidence = sum(1 for d in documents if d.meta.get("supports"))
    payloads = [IbaPayload.of(i) for i in instances]
    return {
        "source": str(folder), "n_instances": len(instances), "n_users": len({i.user_id for i in instances}),
        "n_users_in_histories": n_users, "n_documents": len(documents), "n_evidence": n_evidence,
        "by_domain": dict(Counter(i.group for i in instances)),
        "by_action_type": dict(Counter(p.action_type for p in payloads)),
        "evidence_hist": dict(Counter(bucket(p.n_evidence) for p in payloads)),
        "constraints_hist": dict(Counter(bucket(p.n_constraints) for p in payloads)),
    }


IBA_LAYOUT = Layout(instance_from_row, history_row, release_info, NOT_PUBLIC)


# --- writing the layout (round trips, and sharing a constructed build in release form) ----------


def instance_row(inst: Instance) -> dict[str, Any]:
    p, g = IbaPayload.of(inst), IbaGold.of(inst)
    row: dict[str, Any] = {"instance_id": inst.instance_id, "user_id": inst.user_id, "domain": inst.group,
                           "scenario": p.scenario, "action_type": p.action_type, "query": inst.query,
                           "preferences": [{k: x.get(k) for k in ("dimension", "value", "previous")}
                                           for x in g.preferences],
                           "persona": g.persona or None, "n_evidence": p.n_evidence,
                           "n_constraints": p.n_constraints}
    if "task_case" in g.model_fields_set:  # written only when the build kept one
        row["task_case"] = g.task_case
    if p.action_type == "call_api":
        row.update(api=p.api, gold_slots=g.slots)
    else:
        row["checkpoints"] = g.checkpoints
    return row


def history_row_of(doc: Document) -> dict[str, Any]:
    supports = doc.meta.get("supports") or []
    evidence = [{"dimension": s["dimension"], "value": s["value"], "phase": s["dynamic_phase"],
                 **({} if s["kind"] == UNSPECIFIED else {"kind": s["kind"]})} for s in supports] or None
    return {"user_id": doc.owner, "turn_id": doc.doc_id, "timestamp": doc.timestamp, "text": doc.text,
            "scenario": doc.meta.get("scenario"), "evidence": evidence}


def write_release(data: BenchmarkData, folder: str | Path, fmt: str = "jsonl") -> Path:
    """Write `data` in the release layout (jsonl, or parquet with nested fields as JSON text)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tables = {INSTANCES: [instance_row(i) for i in data.instances if IbaPayload.of(i).action_type != "qa"],
              HISTORIES: [history_row_of(d) for d in data.documents]}
    for stem, rows in tables.items():
        if fmt == "jsonl":
            with open(folder / f"{stem}.jsonl", "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        elif fmt == "parquet":
            _write_parquet(rows, folder / f"{stem}.parquet")
        else:
            raise ValueError(f"fmt must be jsonl or parquet, not {fmt!r}")
    return folder


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(dict.fromkeys(k for r in rows for k in r))
    nested = lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v  # noqa: E731
    columns = {n: [nested(r.get(n)) for r in rows] for n in names}
    pq.write_table(pa.table(columns), path)
