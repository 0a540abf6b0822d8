"""The work of each pipeline stage, as plain functions of typed units (perseval.pipeline.plan) and a Runtime.

tasks/ wraps each as a Prefect task; nothing here knows about Prefect. A stage
function computes its unit and writes it under the unit's content key; whether
it needs to run at all is decided once, beforehand, by perseval.pipeline.freshness. Each
unit is computed under a lock on its output, so two runs of overlapping
experiments never write one unit at once: the one that waited finds it done
(another run just finished it) and returns what is there.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import ANALYSIS_COLUMNS, AnalysisInputs, Benchmark
from perseval.kernel.capabilities import Capability, needs_model
from perseval.experiment.components import make_agent, make_benchmark, make_judges, make_retriever
from perseval.pipeline.freshness import analysis_done, data_done, index_done, judge_done, part_final, score_done
from perseval.llm.settings import ModelConfig, Sampling
from perseval.pipeline.controls import history_owners, mark_outputs, owner_swap, swapped_context, swapped_items
from perseval.pipeline.cost import USAGE_INFO, unit_record
from perseval.core.errors import InputError
from perseval.core.hashing import canonical_json
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.metrics.aggregate import group_table, scores_frame
from perseval.metrics.ci_tables import cluster_of, uncertainty_tables
from perseval.pipeline.units import AnalysisUnit, Cell, DataUnit, IndexUnit, JudgeUnit, RunUnit, Sharding, shards
from perseval.core.instances import (CORPUS_OWNER, AgentOutput, Document, Instance, InstanceScore, Judgment, Passage,
                              instant)
from perseval.core.redact import redact_records
from perseval.judges.base import at_threshold
from perseval.kernel.registry import benchmark_class, load_plugins
from perseval.retrieval.base import ChunkIndex, chunks_file, shard_counts
from perseval.pipeline.runner import judge_shard, run_agent_shard, score_outputs
from perseval.core.schema import from_table
from perseval.retrieval.search import make_search
from perseval.core.store import StageStore, atomic_write_text, unit_lock


@dataclass(frozen=True)
class Stage:
    """A stage's name (its output folder, the first word of its keys) and its version: bump the version
    beside the stage's code when that code changes what the stage writes, to invalidate old outputs."""

    name: str
    version: int

    @property
    def key_head(self) -> tuple[str, int]:
        return self.name, self.version


@dataclass
class Runtime:
    """What every task of one flow run shares: where outputs go, the request cache, the live endpoints."""

    root: str
    run_id: str
    cache_path: str
    shard_size: int | Sharding  # an experiment's explicit size, or its Sharding (perseval.pipeline.units)
    plugins: tuple[str, ...] = ()
    endpoints: dict[str, Endpoint] = field(default_factory=dict)  # model name -> a started deployment

    def store(self, stage: str, key: str) -> StageStore:
        return StageStore(self.root, stage, key)

    def shard_length(self, data_key: str) -> int:
        """How many instances each shard of a data key holds."""
        return data_manifest(self.root, data_key, self.shard_size).shard_size

    def client(self, model: ModelConfig, sampling: Sampling, role: str, seed: int) -> LLMClient:
        if model.name not in self.endpoints:
            raise RuntimeError(f"model {model.name!r} is needed but was not served")
        return LLMClient(self.endpoints[model.name], sampling, RequestCache(self.cache_path), role=role,
                         run_id=self.run_id, seed=seed)


def _cost_info(rt: Runtime, t0: float, clients: list[LLMClient]) -> dict[str, Any]:
    """A shard part's record of what computing it cost (perseval.pipeline.cost), kept in its Parquet metadata."""
    return {USAGE_INFO: unit_record(rt.run_id, time.monotonic() - t0, [c.usage for c in clients])}


def _summary(records: list[AgentOutput] | list[Judgment], key: str) -> dict[str, Any]:
    return {"key": key, "n": len(records), "status": dict(Counter(r.status for r in records))}


# ---- construct / ingest -------------------------------------------------------------------------

DATA = Stage("data", 4)


@dataclass(frozen=True)
class DataManifest:
    """What the construct stage wrote for one data key, read once from its manifest."""

    key: str
    benchmark: str
    n_instances: int
    n_documents: int
    shard_ids: tuple[int, ...]  # the run and judge shards of these instances (perseval.pipeline.units.shards)
    info: dict[str, Any] = field(default_factory=dict)
    shard_size: int = 0  # instances per shard


def data_manifest(root: str, key: str, shard_size: int | Sharding) -> DataManifest:
    m = StageStore(root, "data", key).manifest()
    n = m["n_instances"]
    size = shard_size.size(n) if isinstance(shard_size, Sharding) else shard_size
    return DataManifest(key, m["benchmark"], n, m["n_documents"], tuple(shards(n, size)), m.get("info", {}), size)


def construct(unit: DataUnit, rt: Runtime) -> DataManifest:
    """The one writer of a data key: a benchmark's build, batch by batch, after clearing any unfinished parts."""
    with unit_lock(rt.root, "data", unit.key):
        if not data_done(rt.root, unit):
            _construct(unit, rt)
    return data_manifest(rt.root, unit.key, rt.shard_size)


def _construct(unit: DataUnit, rt: Runtime) -> None:
    load_plugins(rt.plugins)
    data, docs = rt.store("data", unit.key), rt.store("documents", unit.key)
    data.clear()
    docs.clear()
    entry = unit.entry
    bench: Benchmark = make_benchmark(entry.name, unit.params)
    t0 = time.monotonic()

    async def work(models: dict[str, LLMClient]) -> tuple[int, int, dict[str, Any]]:
        async with AsyncExitStack() as stack:
            for role, model in unit.construction.items():
                models[role] = rt.client(model, model.sampling, f"construct.{role}", unit.seed)
                stack.push_async_callback(models[role].aclose)
            return await _write_batches(bench, unit, data, docs, models)

    clients: dict[str, LLMClient] = {}
    n_instances, n_documents, info = asyncio.run(work(clients))
    seconds = time.monotonic() - t0
    docs.mark_complete({"n": n_documents})
    data.mark_complete({"benchmark": entry.name, "n_instances": n_instances, "n_documents": n_documents,
                        "info": info, "seconds": round(seconds, 2), "run_id": rt.run_id,
                        USAGE_INFO: {role: unit_record(rt.run_id, seconds, [c.usage]) for role, c in clients.items()}})


async def _write_batches(bench: Benchmark, unit: DataUnit, data: StageStore, docs: StageStore,
                         models: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
    entry, seen, info = unit.entry, set(), {}
    part = n_documents = 0
    source = Path(entry.source) if entry.source else None
    async for batch in bench.batches(sample=entry.sample, seed=unit.seed, source=source, models=models):
        info.update(batch.info)
        if not batch.instances and not batch.documents and part > 0:
            continue
        instances = sorted(batch.instances, key=lambda i: i.instance_id)  # shards are slices of this order
        bench.check_instances(instances, entry.source or f"the {entry.name} build")  # typed views, before writing
        for i in instances:
            if i.instance_id in seen:
                raise InputError(entry.source or f"the {entry.name} build", f"instance id {i.instance_id!r} appears "
                                 "twice", field="instance_id")
            seen.add(i.instance_id)
        docs.write_records(part, batch.documents, Document)  # documents first: the instances part completes it
        data.write_records(part, instances, Instance)
        part, n_documents = part + 1, n_documents + len(batch.documents)
    return len(seen), n_documents, info


def load_instances(root: str, dkey: str) -> list[Instance]:
    return StageStore(root, "data", dkey).read_records(Instance)


def shard_instances(root: str, dkey: str, shard: int, shard_size: int) -> list[Instance]:
    """One shard's instances, reading only the data parts it overlaps (their row counts come from the Parquet
    footers): a task's read stays the size of its shard however large the data is."""
    store = StageStore(root, "data", dkey)
    first, stop, offset, tables = shard * shard_size, (shard + 1) * shard_size, 0, []
    for path in store.parts():
        n = pq.ParquetFile(path).metadata.num_rows
        if offset < stop and offset + n > first:
            lo = max(first - offset, 0)
            tables.append(pq.read_table(path).slice(lo, min(stop - offset, n) - lo))
        offset += n
    return from_table(pa.concat_tables(tables), Instance) if tables else []


def load_documents(root: str, dkey: str, owners: set[str] | None = None,
                   between: tuple[str | None, str | None] = (None, None), text_only: bool = False) -> list[Document]:
    """All documents, or only those of `owners` (a shard reads its own users, not the whole history), or of
    the owners `between` first (inclusive) and stop (exclusive; None: unbounded), an index shard's.
    `text_only`: owner, id and text alone (what an index is built from: decoding every document's meta was a
    third of an index shard's time)."""
    store = StageStore(root, "documents", dkey)
    filters = [("owner", "in", sorted(owners))] if owners is not None else []
    filters += [("owner", op, bound) for op, bound in zip((">=", "<"), between) if bound is not None]
    table = store.read(filters=filters or None)
    return from_table(table.select(["owner", "doc_id", "text"]) if text_only else table, Document)


EVIDENCE_TAGS = ('"supports"', '"dimension"')  # a document's meta naming either is (or may be) gold evidence


def evidence_documents(root: str, dkey: str) -> list[Document]:
    """The documents whose meta tags them as evidence, with their owner, id and meta but no text: what the
    evidence analyses read. The text column is never read and the other documents' meta never decoded (a full
    IBA-Bench history is hundreds of thousands of turns)."""
    store = StageStore(root, "documents", dkey)
    if not store.parts():
        return []
    table = store.read(columns=["owner", "doc_id", "meta"])
    tagged = table.filter(pc.or_(*[pc.fill_null(pc.match_substring(table["meta"], tag), False)
                                   for tag in EVIDENCE_TAGS]))
    return from_table(tagged.append_column("text", pa.array([""] * tagged.num_rows, pa.string())), Document)


def shard_of(items: list[Instance], shard: int, shard_size: int) -> list[Instance]:
    return items[shard * shard_size:(shard + 1) * shard_size]


# ---- index --------------------------------------------------------------------------------------

INDEX = Stage("index", 2)
# Documents per index shard: an index unit is built by several tasks, each over a range of owners, so that one
# task holds a bounded share of the history (800,000 LaMP profile items were one task of 179 s before) and
# the shards of a large history run side by side. Derived from the data alone: the same data is always cut
# alike, so a resumed index keeps its finished shards.
INDEX_SHARD_DOCUMENTS = 25_000
RANGES_FILE = "_ranges.json"  # the owner ranges of an index's shards, beside them

OwnerRange = tuple[str | None, str | None]  # [first, stop) in sorted owner order; None: unbounded


def owner_ranges(root: str, dkey: str, per_shard: int = INDEX_SHARD_DOCUMENTS) -> list[OwnerRange]:
    """The owner ranges of the index shards of a data key: owners sorted, cut where the documents counted so
    far pass each multiple of the history's size over the shard count (an owner is never split)."""
    store = StageStore(root, "documents", dkey)
    column = pa.chunked_array([pq.read_table(p, columns=["owner"]).column("owner") for p in store.parts()],
                              pa.string())
    counts = column.value_counts()
    if len(counts) < 2:
        return [(None, None)]
    order = pc.sort_indices(counts.field("values"))
    owners, sizes = counts.field("values").take(order).to_pylist(), counts.field("counts").take(order).to_numpy()
    n = min(len(owners), -(-len(column) // per_shard))
    cuts = np.searchsorted(np.cumsum(sizes), [len(column) * k / n for k in range(1, n)], side="left") + 1
    bounds = [None, *dict.fromkeys(owners[c] for c in cuts if c < len(owners)), None]
    return list(zip(bounds[:-1], bounds[1:]))


def prepare_index(root: str, unit: IndexUnit) -> list[OwnerRange]:
    """The shards of an unfinished index, recorded beside them; an index begun with other ranges (another
    INDEX_SHARD_DOCUMENTS) is cleared first: its shards would overlap these."""
    store = StageStore(root, "index", unit.key)
    ranges = owner_ranges(root, unit.data.key)
    with unit_lock(root, "index", unit.key):
        path = store.dir / RANGES_FILE
        try:
            begun = [tuple(r) for r in json.loads(path.read_text())]
        except (OSError, ValueError, TypeError):
            begun = None
        if begun != ranges:
            store.clear()
            atomic_write_text(json.dumps(ranges), path)
    return ranges


def index_shard(unit: IndexUnit, shard: int, owners: OwnerRange, rt: Runtime) -> dict[str, Any]:
    """One index shard: the documents of one owner range, chunked and indexed (skipped when it is done)."""
    load_plugins(rt.plugins)
    folder = rt.store("index", unit.key).dir
    with unit_lock(rt.root, "index", unit.key, shard):
        done = folder / chunks_file(shard)
        if done.exists():
            return shard_counts(done)
        retriever = make_retriever(unit.retriever, unit.params)
        return retriever.build(load_documents(rt.root, unit.data.key, between=owners, text_only=True), folder, shard)


def finish_index(unit: IndexUnit, rt: Runtime, n_shards: int) -> dict[str, Any]:
    """Mark an index complete once every shard is there: its manifest sums the shards' counts and seconds."""
    store = rt.store("index", unit.key)
    with unit_lock(rt.root, "index", unit.key):
        if not index_done(rt.root, unit):
            counts = [shard_counts(store.dir / chunks_file(s)) for s in range(n_shards)]
            totals = {k: sum(c.get(k, 0) for c in counts) for k in ("owners", "documents", "chunks", "seconds")}
            store.mark_complete({"retriever": unit.retriever.model_dump(), "data_key": unit.data.key,
                                 **totals, "seconds": round(totals["seconds"], 2), "shards": n_shards,
                                 "run_id": rt.run_id})
    return {"key": unit.key, **store.manifest()}


def index(unit: IndexUnit, rt: Runtime) -> dict[str, Any]:
    """A whole index unit in this process, shard after shard (the flow maps the shards over tasks instead)."""
    if not index_done(rt.root, unit):
        ranges = prepare_index(rt.root, unit)
        for shard, owners in enumerate(ranges):
            index_shard(unit, shard, owners, rt)
        return finish_index(unit, rt, len(ranges))
    return {"key": unit.key, **rt.store("index", unit.key).manifest()}


# ---- run agents ---------------------------------------------------------------------------------

def _documents_by_owner(docs: list[Document]) -> dict[str, list[Document]]:
    out: dict[str, list[Document]] = defaultdict(list)
    for d in docs:
        out[d.owner].append(d)
    for v in out.values():
        v.sort(key=lambda d: instant(d.timestamp))
    return out


def _context(unit: RunUnit, rt: Runtime, owners: set[str], by_id: dict[str, Instance]) -> AgentContext:
    """Only what the agent requires: no index is opened, no history read, for an agent that does not use it.
    The plan gave the unit an index exactly when its agent needs one (perseval.kernel.capabilities.needs_index)."""
    needs = unit.agent.needs
    ctx = AgentContext(seed=unit.seed)
    searcher: ChunkIndex | None = None
    if unit.index is not None:
        searcher = make_retriever(unit.index.retriever, unit.index.params).open(
            rt.store("index", unit.index.key).dir, owners)
    if Capability.RETRIEVE in needs and searcher is not None:
        async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
            return searcher.search(owner, query, k)

        ctx.retrieve = retrieve
    if Capability.DOCUMENTS in needs:
        by_owner = _documents_by_owner(load_documents(rt.root, unit.data.key, owners))
        ctx.documents = lambda o: list(by_owner.get(o, []))
    if Capability.SEARCH in needs:
        ctx.search = make_search(unit.agent.search, has_corpus=bool(searcher and searcher.has_owner(CORPUS_OWNER)),
                                 retrieve=searcher.search if searcher else (lambda o, q, k: []),
                                 gold_of=lambda iid: by_id[iid].gold)
    if Capability.REQUEST_FORMAT in needs:
        ctx.request_format = benchmark_class(unit.data.entry.name).request_format
    return ctx


RUN = Stage("run", 4)


def run_shard(unit: RunUnit, shard: int, rt: Runtime) -> dict[str, Any]:
    with unit_lock(rt.root, "run", unit.key, shard):
        if part_final(rt.root, "run", unit.key, shard):
            return _summary(rt.store("run", unit.key).read_part(shard, AgentOutput), unit.key)
        return _run_shard(unit, shard, rt)


def _run_shard(unit: RunUnit, shard: int, rt: Runtime) -> dict[str, Any]:
    t0 = time.monotonic()
    load_plugins(rt.plugins)
    agent = make_agent(unit.agent)
    size = rt.shard_length(unit.data.key)
    # a control pairs each user with another of the whole data; a plain run reads its shard alone
    instances = load_instances(rt.root, unit.data.key) if unit.control else \
        shard_instances(rt.root, unit.data.key, shard, size)
    by_id = {i.instance_id: i for i in instances}
    swap = owner_swap(unit.control, instances)  # None for a plain run: nothing below changes then
    items = swapped_items(shard_of(instances, shard, size) if unit.control else instances, swap)
    ctx = swapped_context(_context(unit, rt, history_owners(items, swap) | {CORPUS_OWNER}, by_id), swap)

    clients: list[LLMClient] = []

    async def work() -> list[AgentOutput]:
        if unit.model is not None and needs_model(unit.agent.needs):
            ctx.llm = rt.client(unit.model, unit.model.sampling, "agent", unit.seed)
            clients.append(ctx.llm)
        for role, model in unit.roles.items():  # a profiler: served like the backbone, under its own role
            client = rt.client(model, model.sampling, f"agent.{role}", unit.seed)
            ctx.roles[role] = client
            clients.append(client)
        try:
            return await run_agent_shard(agent, unit.agent.name, items, ctx, unit.repeats)
        finally:
            for client in clients:
                await client.aclose()

    outputs = mark_outputs(redact_records(asyncio.run(work())), unit.control, swap, by_id)  # no key in a text
    rt.store("run", unit.key).write_records(shard, outputs, AgentOutput, _cost_info(rt, t0, clients))
    return _summary(outputs, unit.key)


# ---- judge --------------------------------------------------------------------------------------

JUDGE = Stage("judge", 3)


def judge(unit: JudgeUnit, shard: int, rt: Runtime) -> dict[str, Any]:
    with unit_lock(rt.root, "judge", unit.key, shard):
        if judge_done(rt.root, unit, shard):
            return _summary(rt.store("judge", unit.key).read_part(shard, Judgment), unit.key)
        return _judge(unit, shard, rt)


def _judge(unit: JudgeUnit, shard: int, rt: Runtime) -> dict[str, Any]:
    t0 = time.monotonic()
    load_plugins(rt.plugins)
    spec = unit.judge
    judges = make_judges(spec)
    outputs = rt.store("run", unit.run.key).read_part(shard, AgentOutput)
    # the shard's own instances: what its outputs answer (reading every instance made the stage quadratic)
    by_id = {i.instance_id: i for i in shard_instances(rt.root, unit.run.data.key, shard,
                                                        rt.shard_length(unit.run.data.key))}

    clients: list[LLMClient] = []

    async def work() -> list[Judgment]:
        if not spec.uses_llm:
            return await judge_shard(judges, spec.bindings(), by_id, outputs)
        assert spec.model is not None and spec.sampling is not None  # a judge that uses a model has both
        client = rt.client(spec.model, spec.sampling, "judge", unit.seed)
        clients.append(client)
        try:
            return await judge_shard(judges, spec.bindings(client), by_id, outputs)
        finally:
            await client.aclose()

    judgments = redact_records(asyncio.run(work()))
    rt.store("judge", unit.key).write_records(shard, judgments, Judgment, _cost_info(rt, t0, clients))
    return _summary(judgments, unit.key)


# ---- score --------------------------------------------------------------------------------------

SCORE = Stage("score", 4)


def score(cell: Cell, rt: Runtime) -> dict[str, Any]:
    cell_shards = list(data_manifest(rt.root, cell.run.data.key, rt.shard_size).shard_ids)
    with unit_lock(rt.root, "score", cell.key):
        if not score_done(rt.root, cell, cell_shards):
            _score(cell, rt)
    return score_summary(rt.root, cell)


def _score(cell: Cell, rt: Runtime) -> None:
    t0 = time.monotonic()
    load_plugins(rt.plugins)
    judges = make_judges(cell.judged.judge)
    by_id = {i.instance_id: i for i in load_instances(rt.root, cell.run.data.key)}
    outputs = rt.store("run", cell.run.key).read_records(AgentOutput)
    judgments = as_scored(rt.root, cell, rt.store("judge", cell.judged.key).read_records(Judgment))
    scores = score_outputs(judges, by_id, outputs, judgments)
    failed = Counter(by_id[o.instance_id].group for o in outputs if o.status == "failed")  # no score: counted
    bench = benchmark_class(cell.benchmark)
    scores += make_benchmark(cell.benchmark, cell.run.data.params).combine(scores)
    scores = [replace(s, user_id=cluster_of(by_id[s.instance_id])) for s in scores]  # the clusters of the intervals
    combined = [m for m in bench.combined_metrics if m in {s.metric for s in scores}]
    declared = list(dict.fromkeys([*combined, *(m for j in judges for m in j.metrics)]))
    headline = bench.headline_metric if bench.headline_metric in declared else declared[0]
    present = {s.metric for s in scores}
    metrics = [headline] + [m for m in declared + sorted(present) if m != headline and m in present]
    metrics = list(dict.fromkeys(metrics))
    store = rt.store("score", cell.key)
    store.write_records(0, scores, InstanceScore)
    store.mark_complete({"judge_key": cell.judged.key, "n_scores": len(scores), "metrics": metrics,
                         "headline_metric": headline, "group_label": bench.group_label,
                         "outputs": dict(Counter(o.status for o in outputs)),
                         "judgments": dict(Counter(j.status for j in judgments)),
                         "table": group_table(scores, metrics, failed, cell.statistics, cell.name).reset_index()
                                  .to_dict("records"),
                         "seconds": round(time.monotonic() - t0, 2), "run_id": rt.run_id})


def as_scored(root: str, cell: Cell, judgments: list[Judgment]) -> list[Judgment]:
    """The cell's judgments as it is scored from them: as the judge stage stored them, or, for a judge with
    `threshold: calibrated`, with each verdict read from P(true) read again at the threshold its probe chose
    (unscored, saying why, where the probe chose none)."""
    if cell.probe is None:
        return judgments
    return at_threshold(judgments, *calibrated_threshold(root, cell.probe))


def calibrated_threshold(root: str, probe_key: str) -> tuple[float | None, str]:
    """The threshold a complete probe chose (perseval.pipeline.probes), or None and why not."""
    store = StageStore(root, "probe", probe_key)
    if not store.is_complete():
        return None, f"threshold: calibrated, but probe {probe_key} is not complete (a probe judgment failed or it " \
                     "has not run): the next run redoes it"
    threshold = store.manifest()["report"].get("threshold")
    return threshold, "" if threshold is not None else \
        f"threshold: calibrated, but probe {probe_key} chose none (none of its verdicts carry P(true), or those " \
        "that do are all of items of one verdict)"


def score_summary(root: str, cell: Cell) -> dict[str, Any]:
    return {"key": cell.key, **StageStore(root, "score", cell.key).manifest()}


# ---- probe (perseval.pipeline.probes: the work; its key is made here, beside the others) --------------------

PROBE = Stage("probe", 2)  # 2: verdicts read from token probabilities, AUC of P(true), PrefEval's checks probed


# ---- analyze ------------------------------------------------------------------------------------

ANALYSIS = Stage("analysis", 5)


def analysis_frame(root: str, unit: AnalysisUnit) -> pd.DataFrame:
    """The long frame Benchmark.analyze receives: every instance score of every cell, with the cell's identity."""
    frames = []
    for c in unit.cells:
        df = scores_frame(StageStore(root, "score", c.key).read_records(InstanceScore))
        agent = c.run.agent
        df = df.drop(columns=["agent", "judge"]).assign(
            cell=c.name, agent=c.agent, agent_kind=agent.kind, agent_params=canonical_json(agent.params.model_dump(mode="json", exclude_unset=True)),
            backbone=c.backbone or "-", retriever=c.retriever, judge=c.judge, judge_model=c.judge_model or "-")
        frames.append(df)
    return pd.concat(frames, ignore_index=True)[ANALYSIS_COLUMNS] if frames else pd.DataFrame(columns=ANALYSIS_COLUMNS)


def analyze(unit: AnalysisUnit, rt: Runtime) -> dict[str, Any]:
    """Cross-cell tables (CSV + Markdown) and figures (PNG) of one benchmark, under analysis/<key>/."""
    with unit_lock(rt.root, "analysis", unit.key):
        if not analysis_done(rt.root, unit):
            _analyze(unit, rt)
    return {"key": unit.key, **rt.store("analysis", unit.key).manifest()}


def _analyze(unit: AnalysisUnit, rt: Runtime) -> None:
    load_plugins(rt.plugins)
    store = rt.store("analysis", unit.key)
    store.clear()
    entry = unit.data.entry
    bench: Benchmark = make_benchmark(entry.name, unit.data.params)
    scores, instances = analysis_frame(rt.root, unit), load_instances(rt.root, unit.data.key)
    results = bench.analyze_run(AnalysisInputs(
        scores, instances,
        outputs=lambda: _cell_records(rt.root, unit, "run"), judgments=lambda: _cell_records(rt.root, unit, "judge"),
        documents=lambda: load_documents(rt.root, unit.data.key),
        evidence=lambda: evidence_documents(rt.root, unit.data.key),
        agents={c.agent: c.run.agent.params for c in unit.cells}))
    headlines = [StageStore(rt.root, "score", c.key).manifest().get("headline_metric") for c in unit.cells]
    results |= uncertainty_tables(scores, instances, max(set(headlines), key=headlines.count, default=None),
                                  unit.statistics)  # every benchmark's means with their intervals
    store.dir.mkdir(parents=True, exist_ok=True)
    files = [write_artifact(store.dir, name, obj) for name, obj in sorted(results.items())]
    store.mark_complete({"benchmark": entry.name, "files": files})


def _cell_records(root: str, unit: AnalysisUnit, stage: str) -> pd.DataFrame:
    """Every agent output (stage "run", once per distinct run) or judgment (stage "judge", per cell) of an
    analysis unit, with the columns that say which cell produced it."""
    frames, seen = [], set()
    for c in unit.cells:
        key = c.run.key if stage == "run" else c.judged.key
        if key in seen:
            continue
        seen.add(key)
        cls = AgentOutput if stage == "run" else Judgment
        records = StageStore(root, stage, key).read_records(cls)
        # by field, not dataclasses.asdict per record: its deep copy of every trace and prompt was most of the
        # analyze stage
        df = pd.DataFrame({f.name: [getattr(r, f.name) for r in records] for f in fields(cls)})
        ids = {"agent": c.agent, "backbone": c.backbone or "-", "retriever": c.retriever}
        if stage == "judge":
            ids |= {"cell": c.name, "judge": c.judge, "judge_model": c.judge_model or "-"}
        frames.append(df.drop(columns=[k for k in ids if k in df.columns]).assign(**ids))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def write_artifact(folder: Path, name: str, obj: Any) -> str:
    """A DataFrame -> <name>.csv and <name>.md; a matplotlib Figure -> <name>.png. Returns the main file name."""
    if isinstance(obj, pd.DataFrame):
        obj.to_csv(folder / f"{name}.csv")
        # counts stay whole: to_markdown turns an int column into floats ("30.0") unless it holds Python ints
        ints = {c: object for c in obj.columns if pd.api.types.is_integer_dtype(obj[c])}
        (folder / f"{name}.md").write_text(obj.astype(ints).to_markdown(floatfmt=".1f") if not obj.empty
                                           else "(empty)\n")
        return f"{name}.csv"
    obj.savefig(folder / f"{name}.png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(obj)
    return f"{name}.png"
