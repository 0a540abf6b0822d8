"""The work of each pipeline stage, as plain functions of paths, keys and config dicts.

tasks/ wraps each as a cached Prefect task; nothing here knows about Prefect.
Every function first checks whether its content-addressed output exists and
returns at once if it does: that is what makes a re-run cheap.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import ANALYSIS_COLUMNS, Benchmark, JudgeBinding
from perseval.config import AgentConfig, BenchmarkEntry, JudgeConfig, ModelConfig, RetrieverConfig, Sampling
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.hashing import canonical_json
from perseval.metrics.aggregate import group_table, scores_frame
from perseval.records import CORPUS_OWNER, AgentOutput, Document, Instance, InstanceScore, Judgment, Passage
from perseval.registry import agent_class, benchmark_class
from perseval.retrieval.index import HistoryIndex, build_index
from perseval.search import make_search
from perseval.runner import judge_shard, run_agent_shard, score_outputs
from perseval.schema import from_table
from perseval.store import MANIFEST, StageStore


def _store(root: str, stage: str, key: str) -> StageStore:
    return StageStore(root, stage, key)


# ---- freshness: make's rule on top of content keys ------------------------------------------------
# A key says which inputs and config an output was made from; a part that had failures is redone on
# the next run, and then everything made from it must be redone too. So an output counts as done
# only if it exists, holds no failure, and is newer than every file it was made from.

def _newer(path: Path, inputs: list[Path]) -> bool:
    if not path.exists():
        return False
    mtime = path.stat().st_mtime_ns
    return all(p.exists() and p.stat().st_mtime_ns <= mtime for p in inputs)


def run_done(root: str, key: str, shard: int) -> bool:
    return _store(root, "run", key).has_final_part(shard)


def judge_done(root: str, key: str, rkey: str, shard: int) -> bool:
    store = _store(root, "judge", key)
    return store.has_final_part(shard) and _newer(store.part_path(shard), [_store(root, "run", rkey).part_path(shard)])


def score_done(root: str, key: str, rkey: str, jkey: str) -> bool:
    store = _store(root, "score", key)
    inputs = _store(root, "run", rkey).parts() + _store(root, "judge", jkey).parts()
    return store.is_complete() and _newer(store.dir / MANIFEST, inputs)


def analysis_done(root: str, key: str, cells: list[dict[str, Any]]) -> bool:
    store = _store(root, "analysis", key)
    inputs = [_store(root, "score", c["score_key"]).dir / MANIFEST for c in cells]
    return store.is_complete() and _newer(store.dir / MANIFEST, inputs)


# ---- construct / ingest -------------------------------------------------------------------------

def construct(root: str, entry: dict[str, Any], seed: int, key: str) -> dict[str, Any]:
    data, docs = _store(root, "data", key), _store(root, "documents", key)
    if not data.is_complete():
        e = BenchmarkEntry.model_validate(entry)
        bench: Benchmark = benchmark_class(e.name)(e.params)
        t0 = time.monotonic()
        built = bench.build(sample=e.sample, seed=seed, source=Path(e.source) if e.source else None)
        built.instances.sort(key=lambda i: i.instance_id)  # shards are slices of this fixed order
        data.write_records("instances", built.instances, Instance)
        docs.write_records(0, built.documents, Document)
        docs.mark_complete({"n": len(built.documents)})
        data.mark_complete({"benchmark": e.name, "n_instances": len(built.instances),
                            "n_documents": len(built.documents), "info": built.info,
                            "seconds": round(time.monotonic() - t0, 2)})
    return {"key": key, **data.manifest()}


def load_instances(root: str, dkey: str) -> list[Instance]:
    return _store(root, "data", dkey).read_records(Instance)


def load_documents(root: str, dkey: str, owners: set[str] | None = None) -> list[Document]:
    """All documents, or only those of `owners` (a shard reads its own users, not the whole history)."""
    store = _store(root, "documents", dkey)
    if owners is None:
        return store.read_records(Document)
    return from_table(store.read(filters=[("owner", "in", sorted(owners))]), Document)


def shard_of(items: list[Instance], shard: int, shard_size: int) -> list[Instance]:
    return items[shard * shard_size:(shard + 1) * shard_size]


# ---- index --------------------------------------------------------------------------------------

def index(root: str, dkey: str, retriever: dict[str, Any], key: str) -> dict[str, Any]:
    store = _store(root, "index", key)
    if not store.is_complete():
        t0 = time.monotonic()
        counts = build_index(load_documents(root, dkey), RetrieverConfig.model_validate(retriever), store.dir)
        store.mark_complete({"retriever": retriever, "data_key": dkey, **counts,
                             "seconds": round(time.monotonic() - t0, 2)})
    return {"key": key, **store.manifest()}


# ---- run agents ---------------------------------------------------------------------------------

def _documents_by_owner(docs: list[Document]) -> dict[str, list[Document]]:
    out: dict[str, list[Document]] = defaultdict(list)
    for d in docs:
        out[d.owner].append(d)
    for v in out.values():
        v.sort(key=lambda d: d.timestamp)
    return out


def _context(idx: HistoryIndex, by_owner: dict[str, list[Document]], llm: LLMClient | None,
             search_mode: str | dict[str, Any], instances: dict[str, Instance]) -> AgentContext:
    async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
        return idx.search(owner, query, k)

    search = make_search(search_mode, has_corpus=CORPUS_OWNER in by_owner, retrieve=idx.search,
                         gold_of=lambda iid: instances[iid].gold)
    return AgentContext(llm=llm, retrieve=retrieve, documents=lambda o: list(by_owner.get(o, [])), search=search)


def run_shard(root: str, *, bench_name: str, dkey: str, ikey: str, retriever: dict[str, Any],
              agent: dict[str, Any], model: dict[str, Any] | None, endpoint: dict[str, Any] | None,
              shard: int, shard_size: int, repeats: int, seed: int, run_id: str, cache_path: str,
              key: str) -> dict[str, Any]:
    store = _store(root, "run", key)
    if run_done(root, key, shard):
        return _summary(store.read_part(shard, AgentOutput), key)
    acfg = AgentConfig.model_validate(agent)
    agent_obj = agent_class(acfg.kind)(acfg.params)
    instances = load_instances(root, dkey)
    by_id = {i.instance_id: i for i in instances}
    shard_items = shard_of(instances, shard, shard_size)
    owners = {i.user_id for i in shard_items} | {CORPUS_OWNER}
    idx = HistoryIndex(_store(root, "index", ikey).dir, RetrieverConfig.model_validate(retriever), owners)
    by_owner = _documents_by_owner(load_documents(root, dkey, owners))
    search_mode = acfg.params.get("search", "corpus")

    async def work() -> list[AgentOutput]:
        llm = None
        if model is not None and endpoint is not None:
            mcfg = ModelConfig.model_validate(model)
            llm = LLMClient.for_model(Endpoint(**endpoint), mcfg, RequestCache(cache_path), role="agent",
                                      run_id=run_id, seed=seed)
        try:
            ctx = _context(idx, by_owner, llm, search_mode, by_id)
            return await run_agent_shard(agent_obj, acfg.name, shard_items, ctx, repeats)
        finally:
            if llm is not None:
                await llm.aclose()

    outputs = asyncio.run(work())
    store.write_records(shard, outputs, AgentOutput)
    return _summary(outputs, key)


def _summary(records: list[AgentOutput] | list[Judgment], key: str) -> dict[str, Any]:
    return {"key": key, "n": len(records), "status": dict(Counter(r.status for r in records))}


# ---- judge --------------------------------------------------------------------------------------

def judge(root: str, *, bench_name: str, bench_params: dict[str, Any], dkey: str, rkey: str, shard: int,
          judge_cfg: dict[str, Any] | None, judge_model: dict[str, Any] | None, endpoint: dict[str, Any] | None,
          seed: int, run_id: str, cache_path: str, key: str) -> dict[str, Any]:
    store = _store(root, "judge", key)
    if judge_done(root, key, rkey, shard):
        return _summary(store.read_part(shard, Judgment), key)
    bench: Benchmark = benchmark_class(bench_name)(bench_params)
    outputs = _store(root, "run", rkey).read_part(shard, AgentOutput)
    by_id = {i.instance_id: i for i in load_instances(root, dkey)}

    async def work() -> list[Judgment]:
        if judge_cfg is None:
            return await judge_shard(bench, by_id, outputs, [None])
        jcfg = JudgeConfig.model_validate(judge_cfg)
        mcfg = ModelConfig.model_validate(judge_model)
        client = LLMClient.for_model(Endpoint(**endpoint), mcfg, RequestCache(cache_path), role="judge",
                                     run_id=run_id, seed=seed, sampling=Sampling.model_validate(jcfg.sampling))
        try:
            bindings = [JudgeBinding(jcfg.name, client, r) for r in range(jcfg.repeats)]
            return await judge_shard(bench, by_id, outputs, bindings)
        finally:
            await client.aclose()

    judgments = asyncio.run(work())
    store.write_records(shard, judgments, Judgment)
    return _summary(judgments, key)




# ---- score --------------------------------------------------------------------------------------

def score(root: str, *, bench_name: str, bench_params: dict[str, Any], dkey: str, rkey: str, jkey: str,
          key: str) -> dict[str, Any]:
    store = _store(root, "score", key)
    if not score_done(root, key, rkey, jkey):
        bench: Benchmark = benchmark_class(bench_name)(bench_params)
        by_id = {i.instance_id: i for i in load_instances(root, dkey)}
        outputs = _store(root, "run", rkey).read_records(AgentOutput)
        judgments = _store(root, "judge", jkey).read_records(Judgment)
        scores = score_outputs(bench, by_id, outputs, judgments)
        store.write_records(0, scores, InstanceScore)
        metrics = _metric_order(bench, scores)
        table = group_table(scores, metrics)
        store.mark_complete({"judge_key": jkey, "n_scores": len(scores), "metrics": metrics,
                             "headline_metric": bench.headline_metric, "group_label": bench.group_label,
                             "outputs": dict(Counter(o.status for o in outputs)),
                             "judgments": dict(Counter(j.status for j in judgments)),
                             "table": table.reset_index().to_dict("records")})
    return {"key": key, **store.manifest()}


def _metric_order(bench: Benchmark, scores: list[InstanceScore]) -> list[str]:
    names = sorted({s.metric for s in scores})
    return [bench.headline_metric] + [m for m in names if m != bench.headline_metric]


# ---- analyze ------------------------------------------------------------------------------------

def analysis_frame(root: str, cells: list[dict[str, Any]]) -> pd.DataFrame:
    """The long frame Benchmark.analyze receives: every instance score of every cell, with the cell's identity."""
    frames = []
    for c in cells:
        df = scores_frame(_store(root, "score", c["score_key"]).read_records(InstanceScore))
        df = df.drop(columns=["agent"]).assign(cell=c["name"], agent=c["agent"], agent_kind=c["agent_kind"],
                                               agent_params=canonical_json(c["agent_params"]),
                                               backbone=c["backbone"] or "-", retriever=c["retriever"],
                                               judge=c["judge"])
        frames.append(df)
    return pd.concat(frames, ignore_index=True)[ANALYSIS_COLUMNS] if frames else pd.DataFrame(columns=ANALYSIS_COLUMNS)


def analyze(root: str, *, bench_name: str, bench_params: dict[str, Any], dkey: str, cells: list[dict[str, Any]],
            key: str) -> dict[str, Any]:
    """Cross-cell tables (CSV + Markdown) and figures (PNG) of one benchmark, under analysis/<key>/."""
    store = _store(root, "analysis", key)
    if not analysis_done(root, key, cells):
        bench: Benchmark = benchmark_class(bench_name)(bench_params)
        results = bench.analyze(analysis_frame(root, cells), load_instances(root, dkey))
        store.dir.mkdir(parents=True, exist_ok=True)
        files = [write_artifact(store.dir, name, obj) for name, obj in sorted(results.items())]
        store.mark_complete({"benchmark": bench_name, "files": files})
    return {"key": key, **store.manifest()}


def write_artifact(folder: Path, name: str, obj: Any) -> str:
    """A DataFrame -> <name>.csv and <name>.md; a matplotlib Figure -> <name>.png. Returns the main file name."""
    if isinstance(obj, pd.DataFrame):
        obj.to_csv(folder / f"{name}.csv")
        (folder / f"{name}.md").write_text(obj.to_markdown(floatfmt=".1f") if not obj.empty else "(empty)\n")
        return f"{name}.csv"
    obj.savefig(folder / f"{name}.png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(obj)
    return f"{name}.png"
