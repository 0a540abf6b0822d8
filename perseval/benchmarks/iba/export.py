"""Stream a construction into the content-addressed store, one part per chunk of instances.

Same layout as perseval.stages.construct (`data/<key>/` instances, `documents/<key>/`
history turns, a manifest marking each complete), but written chunk by chunk so
a full-size build (about 1.4 million turns at 100 noise turns per evidence turn)
never sits in memory whole, and so an interrupted LLM-mode build resumes at the
first missing part. Parts are written in plan order and instance ids grow with
the plan index, so the concatenated instances are sorted by id, as stages expect.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Awaitable, Callable, Iterable, Iterator

from perseval.benchmarks.iba.construct import BuildPlan, ConstructParams, iter_build, plan_build
from perseval.benchmarks.iba.qa import make_qa_probes
from perseval.benchmarks.iba.stats import ConstructionStats
from perseval.benchmarks.iba.taxonomy import Taxonomy
from perseval.records import Document, Instance
from perseval.store import StageStore

Pair = tuple[Instance, list[Document]]
# Rewrites the surface text of a chunk (LLM mode); must keep ids, order, gold and meta.
Rewriter = Callable[[list[Pair]], Awaitable[list[Pair]]]


def chunks(pairs: Iterable[Pair], size: int) -> Iterator[list[Pair]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _with_probes(instances: list[Instance], qa_probes: bool) -> list[Instance]:
    """The chunk's instances, plus their QA twins when asked, sorted by id (a twin follows its base)."""
    out = instances + (make_qa_probes(instances) if qa_probes else [])
    return sorted(out, key=lambda i: i.instance_id)


def _read_part(data: StageStore, docs: StageStore, part: int, stats: ConstructionStats) -> tuple[int, int]:
    """Count a part an interrupted earlier run wrote into the stats; returns (instances, documents)."""
    instances, documents = data.read_part(part, Instance), docs.read_part(part, Document)
    by_owner: dict[str, list[Document]] = {}
    for d in documents:
        by_owner.setdefault(d.owner, []).append(d)
    for inst in instances:
        if inst.payload.get("action_type") != "qa":
            stats.add(inst, by_owner.get(inst.user_id, []))
    return len(instances), len(documents)


def _write_part(data: StageStore, docs: StageStore, part: int, chunk: list[Pair], stats: ConstructionStats,
                qa_probes: bool) -> tuple[int, int]:
    for inst, turns in chunk:
        stats.add(inst, turns)
    instances = _with_probes([i for i, _ in chunk], qa_probes)
    documents = [d for _, turns in chunk for d in turns]
    docs.write_records(part, documents, Document)  # documents first: the instances part completes the pair
    data.write_records(part, instances, Instance)
    return len(instances), len(documents)


async def write_build_async(root: str, key: str, *, taxonomy: Taxonomy, sample: int, seed: int,
                            params: ConstructParams, qa_probes: bool = False, part_size: int = 256,
                            rewrite: Rewriter | None = None, extra_info: dict | None = None) -> dict[str, Any]:
    """Construct (template text, or rewritten by `rewrite`) and write every part; returns the manifest.

    Async so that LLM clients live on one event loop for the whole build. `extra_info` is merged
    into the info after the last part, so a rewriter may fill it as it goes (request counts).
    """
    data, docs = StageStore(root, "data", key), StageStore(root, "documents", key)
    if data.is_complete():
        return {"key": key, **data.manifest()}
    t0 = time.monotonic()
    plan: BuildPlan = plan_build(taxonomy, sample=sample, seed=seed, params=params)
    stats = ConstructionStats(params, plan, sample)
    n_instances = n_documents = 0
    for part, chunk in enumerate(chunks(iter_build(plan, seed, params), part_size)):
        if data.has_part(part) and docs.has_part(part):
            ni, nd = _read_part(data, docs, part, stats)
        else:
            if rewrite is not None:
                chunk = await rewrite(chunk)
            ni, nd = _write_part(data, docs, part, chunk, stats, qa_probes)
        n_instances, n_documents = n_instances + ni, n_documents + nd
    info = {**stats.info(), **(extra_info or {})}
    if qa_probes:
        info["qa_probes"] = n_instances - stats.n_instances
    docs.mark_complete({"n": n_documents})
    data.mark_complete({"benchmark": "iba", "n_instances": n_instances, "n_documents": n_documents, "info": info,
                        "seconds": round(time.monotonic() - t0, 2)})
    return {"key": key, **data.manifest()}


def write_build(root: str, key: str, **kwargs: Any) -> dict[str, Any]:
    """The template-mode build written to the store (see write_build_async for the arguments)."""
    return asyncio.run(write_build_async(root, key, **kwargs))
