"""IBA-Bench's release layout (docs/iba-release-layout.md): how its rows become instances and history turns,
what its info counts, and how a build is written back in that layout.

The release is not public yet, so the layout is perseval's expectation, kept
close to what construction writes: an instances file (one row per task
instance) and a histories file (one row per history turn), each as JSON Lines
or Parquet, read by perseval.benchmarks.release_folder (`IBA_LAYOUT.load`). Every
problem raises InputError naming the file, the 1-based row and the field, and
saying what was expected; nothing is guessed or skipped.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from perseval.benchmarks.base import BenchmarkData
from perseval.benchmarks.iba.distribution import OVERALL, TABLE2, bucket
from perseval.benchmarks.iba.personas import persona_cluster
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.benchmarks.release_folder import HISTORIES, INSTANCES, Layout
from perseval.benchmarks.release_rows import UNSPECIFIED, Rows, api_of, checkpoints_of, gold_slots_of, history_row
from perseval.core.instances import Document, Instance
from perseval.metrics.ci_tables import CLUSTER

NOT_PUBLIC = ("the official IBA-Bench release is not public yet; lay a release out as docs/iba-release-layout.md "
              "describes, or leave `source` unset to construct the data")
ACTION_ALIASES = {"generate": "generate", "generate(text)": "generate",
                  "call_api": "call_api", "callapi": "call_api", "callapi(params)": "call_api"}
DOMAINS = tuple(d for d in TABLE2 if d != OVERALL)  # Table 2's nine domains, the reporting groups


# --- reading the layout: an instance row ---------------------------------------------------------


def _action_type(r: Rows) -> str:
    raw = r.need("action_type")
    action = ACTION_ALIASES.get(raw.strip().lower())
    if action is None:
        raise r.fail("action_type", f"unknown value {raw!r}; expected generate or call_api")
    return action


def _preferences(r: Rows) -> list[dict[str, Any]]:
    prefs = []
    for i, p in enumerate(r.items("preferences")):
        w = f"preferences[{i}]"
        prev = r.opt("previous", str, p, f"{w}.previous")
        prefs.append({"dimension": r.need("dimension", str, p, f"{w}.dimension"),
                      "value": r.need("value", str, p, f"{w}.value"), "previous": prev, "dynamic": prev is not None})
    return prefs


def _count(r: Rows, key: str) -> int | None:
    value = r.opt(key, int)
    if value is not None and value < 0:
        raise r.fail(key, f"{value} is negative; expected a count of 0 or more")
    return value


def _constraints(r: Rows, n_preferences: int) -> int:
    """`n_constraints` as given (default: the number of preferences); an instance constrains at least one."""
    value = _count(r, "n_constraints")
    if value == 0:
        raise r.fail("n_constraints", f"0, but the instance has {n_preferences} preference(s); expected 1 or more "
                                      "(leave it out to use the number of preferences)")
    return n_preferences if value is None else value


def _domain(r: Rows) -> str:
    """One of Table 2's nine domains (case and spacing ignored), spelt as Table 2 does."""
    raw = r.need("domain")
    known = {" ".join(d.lower().split()): d for d in DOMAINS}
    domain = known.get(" ".join(raw.lower().split()))
    if domain is None:
        raise r.fail("domain", f"unknown domain {raw!r}; expected one of Table 2's: {list(DOMAINS)}")
    return domain


def instance_from_row(r: Rows) -> Instance:
    """The row as an Instance with construction's payload and gold fields."""
    action = _action_type(r)
    prefs = _preferences(r)
    payload: dict[str, Any] = {"scenario": r.need("scenario"), "action_type": action}
    if action == "call_api":
        payload["api"] = api_of(r)
        gold: dict[str, Any] = {"slots": gold_slots_of(r, payload["api"])}
    else:
        gold = {"checkpoints": checkpoints_of(r)}
    n_evidence = _count(r, "n_evidence")
    if n_evidence is not None:
        payload["n_evidence"] = n_evidence
    payload["n_constraints"] = _constraints(r, len(prefs))
    n_dynamic = sum(p["dynamic"] for p in prefs)
    payload["dynamic"] = n_dynamic > 0
    persona = r.opt("persona", dict) or {}
    gold.update({"preferences": prefs, "n_dynamic": n_dynamic, "persona": persona})
    if persona.get("persona_id"):
        gold[CLUSTER] = persona_cluster(persona["persona_id"])  # as construction clusters
    case = r.opt("task_case", dict)
    if case is not None:
        gold["task_case"] = case
    return Instance(r.need("instance_id"), "iba", r.need("user_id"), _domain(r), r.need("query"), payload, gold)


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
