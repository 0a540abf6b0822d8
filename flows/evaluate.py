"""The evaluate flow: construct -> index -> serve -> run -> judge -> score -> track.

It only composes tasks. Units are mapped per shard of instances onto the task
runner (Dask by default); a unit whose content-addressed output exists is
skipped, and models are served only when an unfinished unit needs them.
"""
from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterable

from prefect import flow
from prefect.futures import PrefectFuture, as_completed

from perseval.config import ResolvedExperiment, load_experiment
from perseval.llm.cache import RequestCache
from perseval.llm.deployments import Deployment
from perseval.llm.endpoint import Endpoint
from perseval.plan import Cell, Plan, analysis_units, entry_seed, make_plan, pending_models, shard_specs
from perseval.progress import stage_bar
from perseval.report import headline, track
from tasks.stages import analyze_task, construct_task, index_task, judge_task, run_shard_task, score_task


def _wait(stage: str, futures: dict[Any, PrefectFuture], show: bool, timings: dict[str, float]) -> dict[Any, Any]:
    """Results of a stage's futures, advancing its progress bar as each finishes."""
    t0 = time.monotonic()
    by_future = {id(f): k for k, f in futures.items()}
    results: dict[Any, Any] = {}
    with stage_bar(stage, len(futures), show) as bar:
        for fut in as_completed(list(futures.values())):
            results[by_future[id(fut)]] = fut.result()
            if bar is not None:
                bar.advance(bar.task_ids[0])
    timings[stage] = round(time.monotonic() - t0, 2)
    return results


def _serve(stack: ExitStack, exp: ResolvedExperiment, names: Iterable[str], root: str) -> dict[str, dict[str, Any]]:
    endpoints: dict[str, dict[str, Any]] = {}
    for name in sorted(names):
        endpoint: Endpoint = stack.enter_context(Deployment(exp.models[name], Path(root) / "logs"))
        endpoints[name] = endpoint.to_dict()
    return endpoints


def _run_spec(exp: ResolvedExperiment, cell: Cell, endpoints: dict[str, Any], run_id: str, cache: str) -> dict:
    e = exp.experiment
    return {"bench_name": cell.benchmark, "dkey": cell.data_key, "ikey": cell.index_key,
            "retriever": exp.retrievers[cell.retriever].model_dump(), "agent": exp.agents[cell.agent].model_dump(),
            "model": exp.models[cell.backbone].model_dump() if cell.backbone else None,
            "endpoint": endpoints.get(cell.backbone) if cell.backbone else None, "shard_size": e.shard_size,
            "repeats": e.repeats, "seed": e.seed, "run_id": run_id, "cache_path": cache}


def _judge_spec(exp: ResolvedExperiment, cell: Cell, endpoints: dict[str, Any], run_id: str, cache: str) -> dict:
    entry = exp.experiment.benchmarks[cell.bench_index]
    judge = exp.judges.get(cell.judge)
    return {"bench_name": cell.benchmark, "bench_params": entry.params, "dkey": cell.data_key,
            "rkey": cell.run_key, "judge_cfg": judge.model_dump() if judge else None,
            "judge_model": exp.models[judge.model].model_dump() if judge else None,
            "endpoint": endpoints.get(judge.model) if judge else None, "seed": exp.experiment.seed,
            "run_id": run_id, "cache_path": cache}


@flow(name="perseval-evaluate", log_prints=True)
def evaluate(config_path: str, output_root: str | None = None, mlflow_base: str | None = None,
             show_progress: bool = True) -> dict[str, Any]:
    """Run one experiment file end to end; returns the headline table, MLflow run id and request counts."""
    exp = load_experiment(config_path)
    if output_root:
        exp.experiment.output_root = output_root
    e, root = exp.experiment, exp.experiment.output_root
    plan: Plan = make_plan(exp)
    run_id = uuid.uuid4().hex
    cache = e.request_cache or str(Path(root) / "request-cache.sqlite")
    timings: dict[str, float] = {}

    data = _wait("construct", {bi: construct_task.submit(root, exp.experiment.benchmarks[bi].model_dump(),
                                                         entry_seed(exp, e.benchmarks[bi]), key)
                               for bi, key in plan.data.items()}, show_progress, timings)
    n_inst = {d["key"]: d["n_instances"] for d in data.values()}
    _wait("index", {k: index_task.submit(root, plan.data[bi], exp.retrievers[r].model_dump(), k)
                    for (bi, r), k in plan.index.items()}, show_progress, timings)

    with ExitStack() as stack:
        t0 = time.monotonic()
        endpoints = _serve(stack, exp, pending_models(plan, root, n_inst), root)
        timings["serve"] = round(time.monotonic() - t0, 2)
        runs = _wait("run", {(k, s): run_shard_task.submit(root, k, s, _run_spec(exp, c, endpoints, run_id, cache))
                             for k, c in plan.runs().items() for s in shard_specs(n_inst[c.data_key], e.shard_size)},
                     show_progress, timings)
        _wait("judge", {(k, s): judge_task.submit(root, k, s, _judge_spec(exp, c, endpoints, run_id, cache))
                        for k, c in plan.judgings().items() for s in shard_specs(n_inst[c.data_key], e.shard_size)},
              show_progress, timings)

    scores = _wait("score", {c.score_key: score_task.submit(root, c.score_key, {
        "bench_name": c.benchmark, "bench_params": e.benchmarks[c.bench_index].params, "dkey": c.data_key,
        "rkey": c.run_key, "jkey": c.judge_key}) for c in plan.cells}, show_progress, timings)

    analyses = _wait("analyze", {bi: analyze_task.submit(root, key, {
        "bench_name": e.benchmarks[bi].name, "bench_params": e.benchmarks[bi].params, "dkey": plan.data[bi],
        "cells": cells}) for bi, (key, cells) in analysis_units(plan).items()}, show_progress, timings)

    requests = RequestCache(cache).request_counts(run_id)
    n_requests = sum(n for by_status in requests.values() for n in by_status.values())
    t0 = time.monotonic()
    stats = {"llm_requests": float(n_requests), **{f"seconds.{k}": v for k, v in timings.items()},
             **{f"llm_requests.{role}.{st}": float(n) for role, d in requests.items() for st, n in d.items()}}
    parent = track(exp, plan, root, scores, analyses, stats, Path(mlflow_base) if mlflow_base else None)
    timings["track"] = round(time.monotonic() - t0, 2)
    return {"mlflow_run_id": parent, "run_id": run_id, "requests": requests, "llm_requests": n_requests,
            "headline": headline(plan, scores).to_dict("records"), "timings": timings,
            "analyses": {e.benchmarks[bi].name: a["files"] for bi, a in analyses.items()},
            "run_outputs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()},
            "experiment": e.mlflow.experiment, "tracking_uri": e.mlflow.tracking_uri}
