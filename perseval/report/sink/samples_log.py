"""The per-sample log, `samples.jsonl` beside record.json: one line per instance (and repeat) and cell, as
lm-eval's `--log_samples` keeps one: the cell (its label and key), the user (the one the statistics cluster on),
the instance, the exact messages of each LLM request the agent made (read from the request cache by the keys
its output recorded), the answer and the parsed answer, the output's status, each verdict with its P(true) and
reason, the score and the trace id. The track stage writes it from the record and the run's stored outputs and
logs it beside the record to the parent MLflow run; `perseval samples` reads it back.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

from perseval.core.instances import Judgment
from perseval.llm.cache import RequestCache
from perseval.report.record import SAMPLES, CellRecord, InstanceRecord
from perseval.report.sink.traces import Outcome, Outcomes


def _verdict(j: Judgment) -> dict[str, Any]:
    return {"kind": j.kind, "item_id": j.item_id, "judge_repeat": j.judge_repeat, "verdict": j.score,
            "status": j.status, "p_true": j.p_true, "reason": j.feedback or None}


def sample_line(cell: CellRecord, inst: InstanceRecord, o: Outcome,
                messages: dict[str, list[dict[str, Any]] | None]) -> dict[str, Any]:
    """One instance of one cell: what was sent, what came back, how it was judged and scored."""
    requests = [{"key": k, "messages": messages.get(k)} for k in o.output.requests]
    return {"cell": cell.label, "cell_key": cell.key, "benchmark": cell.parts.benchmark, "user": inst.user,
            "instance_id": inst.instance_id, "repeat": inst.repeat, "group": inst.group,
            "messages": requests[-1]["messages"] if requests else None, "requests": requests,
            "answer": o.output.text, "parsed": o.output.parsed, "output_status": o.output.status,
            "error": o.output.error or None, "status": inst.status, "score": inst.score,
            "verdicts": [_verdict(j) for j in sorted(o.judgments, key=lambda j: (j.kind, j.item_id, j.judge_repeat))],
            "trace_id": inst.trace_id}


def write_cell_samples(parts: Path, cell: CellRecord, instances: Sequence[InstanceRecord], outs: Outcomes,
                       cache_path: str | None) -> None:
    """One cell's lines into `parts`, a line per instance record (each built from one of `outs`), before the
    trace ids are known: assemble_samples puts the cells together in the record's order with them. The sent
    messages are read from the request cache MESSAGE_BATCH instances at a time (all of a 20,000-instance cell's
    at once held hundreds of MB)."""
    cache = RequestCache(cache_path) if cache_path else None
    with open(parts / f"{cell.key}.jsonl", "w") as fh:
        for start in range(0, len(instances), MESSAGE_BATCH):
            batch = [(inst, outs[(inst.instance_id, inst.repeat)]) for inst in instances[start:start + MESSAGE_BATCH]]
            keys = sorted({k for _, o in batch for k in o.output.requests})
            messages = cache.sent_messages(keys) if cache is not None and keys else {}
            for inst, o in batch:
                fh.write(json.dumps(sample_line(cell, inst, o, messages), ensure_ascii=False) + "\n")


MESSAGE_BATCH = 1000


def assemble_samples(parts: Path, folder: Path, cells: Iterable[CellRecord],
                     instances: Iterable[InstanceRecord]) -> Path:
    """samples.jsonl in the record's folder from the cells' parts (a line per instance record, in its order),
    in the record's order of cells, each traced line given its trace id (only those are decoded again)."""
    by_cell: dict[str, list[InstanceRecord]] = {}
    for i in instances:
        by_cell.setdefault(i.cell, []).append(i)
    path = folder / SAMPLES
    with open(path, "w") as out:
        for cell in cells:
            part = parts / f"{cell.key}.jsonl"
            if not part.is_file():
                continue
            with open(part) as fh:
                for inst, line in zip(by_cell.get(cell.key, []), fh, strict=True):
                    if inst.trace_id:
                        line = json.dumps(json.loads(line) | {"trace_id": inst.trace_id}, ensure_ascii=False) + "\n"
                    out.write(line)
    return path


def link_samples(folder: Path, previous: Path) -> Path | None:
    """The samples.jsonl of the run whose results this one repeats, linked (else copied) into its folder."""
    source, target = previous / SAMPLES, folder / SAMPLES
    if not source.is_file():
        return None
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target
