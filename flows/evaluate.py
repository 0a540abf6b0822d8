"""The evaluate flow: construct -> index -> serve -> run -> judge -> score -> analyze -> track.

It only composes tasks. The plan knows every unit's key before anything runs;
before each stage the flow asks once which units are missing, stale or hold
failures, submits only those (per shard, onto the task runner: Dask by default)
and serves a model only when a pending unit needs it. `perseval construct` is
this flow stopped after its construct stage.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.futures import PrefectFuture, as_completed

from perseval.experiment.config import ResolvedExperiment
from perseval.experiment.load import load_experiment
from perseval.pipeline.cost import UnitRecords, plan_cost
from perseval.pipeline.probes import probe_done, probe_units
from perseval.pipeline.freshness import data_done, index_done, pending, reshard
from perseval.llm.cache import RequestCache
from perseval.llm.deployments import ServerPool
from perseval.llm.embedded import serving
from perseval.pipeline.plan import make_plan
from perseval.pipeline.units import Plan
from perseval.pipeline.units import MIN_SHARD, Sharding
from perseval.core.progress import stage_bar
from perseval.report.sink.track import track
from perseval.report.views.summary import summary_cells
from perseval.pipeline.stages import Runtime, data_manifest, finish_index, prepare_index, score_summary
from perseval.core.store import StageStore
from perseval_tasks.stages import (analyze_task, construct_task, index_task, judge_task, probe_task, run_shard_task,
                          score_task)


@dataclass
class StageClock:
    """Each stage's seconds (`timings`) and, for the stages that had work, its wall-clock window in epoch
    seconds (`windows`: the bench's per-process CPU table attributes its samples to stages by them)."""

    show: bool  # progress bars
    timings: dict[str, float] = field(default_factory=dict)
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)


def _wait(stage: str, futures: dict[Any, PrefectFuture], clock: StageClock, since: float | None = None
          ) -> dict[Any, Any]:
    """Results of a stage's futures, advancing its progress bar as each finishes; the stage's time counts from
    `since` (time.monotonic(): the stage began before its tasks were submitted) or from now."""
    started = time.time() - (time.monotonic() - since if since is not None else 0.0)
    t0 = since if since is not None else time.monotonic()
    by_future = {id(f): k for k, f in futures.items()}
    results: dict[Any, Any] = {}
    with stage_bar(stage, len(futures), clock.show and bool(futures)) as bar:
        for fut in as_completed(list(futures.values())):
            results[by_future[id(fut)]] = fut.result()
            if bar is not None:
                bar.advance(bar.task_ids[0])
    clock.timings[stage] = round(time.monotonic() - t0, 2)
    if futures:
        clock.windows[stage] = (round(started, 3), round(time.time(), 3))
    return results


def _manifests(root: str, stage: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    return {k: {"key": k, **StageStore(root, stage, k).manifest()} for k in keys}


def resolved(experiment: ResolvedExperiment | str | Path) -> ResolvedExperiment:
    """The experiment a flow runs: the one its caller resolved (`perseval run` loads its file once, before any
    server starts, and hands it on), or a config path loaded here (a scheduled deployment's parameter)."""
    if isinstance(experiment, ResolvedExperiment):
        # a copy: the overrides below (output_root, sample) must not reach the caller's experiment
        return experiment.model_copy(deep=True)
    return load_experiment(experiment)


def sharding(exp: ResolvedExperiment) -> Sharding:
    """The experiment's shard size, or the automatic one for its deployments and task slots."""
    concurrency = max((serving(d).max_concurrency for d in exp.deployments.values()), default=1)
    d = exp.experiment.dask
    return Sharding(exp.experiment.shard_size, concurrency, d.n_workers * d.threads_per_worker)


@flow(name="perseval-evaluate", log_prints=True)
def evaluate(experiment: ResolvedExperiment | str, output_root: str | None = None, stop_after: str | None = None,
             sample: int | None = None, mlflow_base: str | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Run one experiment (resolved, or a file's path) end to end (or up to `stop_after="construct"`); returns
    the headline table, MLflow run id and request counts. `sample` overrides every benchmark's sample size."""
    entered_at = time.time()  # the flow run has started: run_experiment times what came before
    exp = resolved(experiment)
    if output_root:
        exp.experiment.output_root = output_root
    for entry in exp.experiment.benchmarks if sample else []:
        entry.sample = sample
    e = exp.experiment
    # absolute: Dask workers may run in another folder (or on another host that mounts the same path)
    root = str(Path(e.output_root).resolve())
    plan: Plan = make_plan(exp)
    cache = str(Path(e.request_cache).resolve()) if e.request_cache else str(Path(root) / "request-cache.sqlite")
    rt = Runtime(root, uuid.uuid4().hex, cache, sharding(exp), exp.plugins)
    clock = StageClock(show_progress)
    timings = clock.timings
    # A damaged cache is set aside here, once, before any worker opens it; and this connection stays open for
    # the whole flow: SQLite deletes the WAL when the last connection closes, and a worker opening the file
    # at that moment reads it short (SQLITE_IOERR_SHORT_READ, 'disk I/O error'), which set a healthy cache
    # aside in cold quickstarts. With one connection held, the WAL is never deleted during the run.
    held_cache = RequestCache(rt.cache_path)
    with ServerPool(exp.models, exp.deployments, Path(root) / "logs", exp.files) as servers:
        building = [u for u in plan.data if not data_done(root, u)]
        crt = replace(rt, endpoints=servers.ensure({m.name for u in building for m in u.construction.values()}))
        _wait("construct", {u.key: construct_task.submit(u, crt) for u in building}, clock)
        data = {u.key: data_manifest(root, u.key, rt.shard_size) for u in plan.data}
        if stop_after == "construct":
            return {"run_id": rt.run_id, "data": {k: asdict(m) for k, m in data.items()}, "timings": timings,
                    "entered_at": entered_at}
        t0 = time.monotonic()  # the index stage: each unfinished index's owner ranges, its shards, its manifest
        indexing = {u.key: (u, prepare_index(root, u)) for u in plan.index if not index_done(root, u)}
        _wait("index", {(k, s): index_task.submit(u, s, owners, rt) for k, (u, ranges) in indexing.items()
                        for s, owners in enumerate(ranges)}, clock, t0)
        for u, ranges in indexing.values():
            finish_index(u, rt, len(ranges))
        clock.timings["index"] = round(time.monotonic() - t0, 2)
        shard_ids = {k: list(m.shard_ids) for k, m in data.items()}
        reshard(root, plan, {k: m.shard_size for k, m in data.items()}, e.shard_size or MIN_SHARD)
        todo = pending(root, plan, shard_ids)
        t0 = time.monotonic()
        rt = replace(rt, endpoints=servers.ensure(todo.models(plan)))
        timings["serve"] = round(time.monotonic() - t0, 2)
        runs = _wait("run", {(u.key, s): run_shard_task.submit(u, s, rt) for u in plan.runs()
                             for s in shard_ids[u.data.key] if (u.key, s) in todo.runs}, clock)
        _wait("judge", {(u.key, s): judge_task.submit(u, s, rt) for u in plan.judgings()
                        for s in shard_ids[u.run.data.key] if (u.key, s) in todo.judges}, clock)
        # judge_probes: off by default. Before the score stage: a `threshold: calibrated` judge's cells are scored
        # at the threshold its probe chooses (their score keys and freshness include the probe's)
        probing = [u for u in probe_units(plan) if not probe_done(root, u)]
        prt = replace(rt, endpoints=servers.ensure({u.model.name for u in probing})) if probing else rt
        _wait("probe", {u.key: probe_task.submit(u, prt) for u in probing}, clock)
    _wait("score", {c.key: score_task.submit(c, rt) for c in plan.cells if c.key in todo.scores}, clock)
    scores = {c.key: score_summary(root, c) for c in plan.cells}
    _wait("analyze", {u.key: analyze_task.submit(u, rt) for u in plan.analyses if u.key in todo.analyses},
          clock)
    analyses = _manifests(root, "analysis", [u.key for u in plan.analyses])

    requests = held_cache.request_counts(rt.run_id)
    n_requests = sum(n for by_status in requests.values() for n in by_status.values())
    distinct = held_cache.distinct_keys(rt.run_id)  # == n_requests when nothing was sent twice
    t0, began = time.monotonic(), time.time()
    stats = {"llm_requests": float(n_requests), **{f"seconds.{k}": v for k, v in timings.items()},
             **{f"llm_requests.{role}.{st}": float(n) for role, d in requests.items() for st, n in d.items()}}
    costs = plan_cost(exp, plan, UnitRecords(root, shard_ids), rt.run_id)
    record = track(exp, plan, root, scores, analyses, stats, costs, Path(mlflow_base) if mlflow_base else None,
                   cache)  # the run record, built once: every view renders it (perseval.report.record)
    timings["track"] = round(time.monotonic() - t0, 2)
    clock.windows["track"] = (round(began, 3), round(time.time(), 3))
    return {"mlflow_run_id": record.run_id, "run_id": rt.run_id, "requests": requests, "llm_requests": n_requests,
            "llm_distinct_requests": distinct, **summary_cells(record), "timings": timings,
            "cost": costs.summary(plan),
            "analyses": {u.data.name: analyses[u.key]["files"] for u in plan.analyses},
            "run_outputs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()},
            "experiment": e.mlflow.experiment, "tracking_uri": e.mlflow.tracking_uri, "entered_at": entered_at,
            "stage_windows": clock.windows}
