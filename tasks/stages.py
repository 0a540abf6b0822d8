"""Prefect tasks: thin, cached wrappers of perseval.stages, one per stage unit.

Tasks take and return paths, keys and small dicts, never frames or clients, so
they pickle cheaply to Dask workers. The Prefect cache key is the unit's
content key, offered only once its output is done (written, without failures,
newer than its inputs): a unit whose output was deleted or went stale is
recomputed even if Prefect remembers an old result.
"""
from __future__ import annotations

from typing import Any, Callable

from prefect import task
from prefect.context import TaskRunContext

from perseval import stages
from perseval.store import StageStore


def _cached_when(stage: str, done: Callable[[dict[str, Any]], bool]) -> Callable[[TaskRunContext, dict[str, Any]], str | None]:
    def key_fn(_ctx: TaskRunContext, params: dict[str, Any]) -> str | None:
        return f"perseval-{stage}-{params['key']}-{params.get('shard')}" if done(params) else None

    return key_fn


def _complete(stage: str) -> Callable[[dict[str, Any]], bool]:
    return lambda p: StageStore(p["root"], stage, p["key"]).is_complete()


_run_done = _cached_when("run", lambda p: stages.run_done(p["root"], p["key"], p["shard"]))
_judge_done = _cached_when("judge", lambda p: stages.judge_done(p["root"], p["key"], p["spec"]["rkey"], p["shard"]))
_score_done = _cached_when("score", lambda p: stages.score_done(p["root"], p["key"], p["spec"]["rkey"],
                                                                p["spec"]["jkey"]))
_analysis_done = _cached_when("analysis", lambda p: stages.analysis_done(p["root"], p["key"], p["spec"]["cells"]))


@task(name="construct", cache_key_fn=_cached_when("data", _complete("data")))
def construct_task(root: str, entry: dict[str, Any], seed: int, key: str) -> dict[str, Any]:
    return stages.construct(root, entry, seed, key)


@task(name="index", cache_key_fn=_cached_when("index", _complete("index")))
def index_task(root: str, dkey: str, retriever: dict[str, Any], key: str) -> dict[str, Any]:
    return stages.index(root, dkey, retriever, key)


@task(name="run-shard", cache_key_fn=_run_done)
def run_shard_task(root: str, key: str, shard: int, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.run_shard(root, key=key, shard=shard, **spec)


@task(name="judge-shard", cache_key_fn=_judge_done)
def judge_task(root: str, key: str, shard: int, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.judge(root, key=key, shard=shard, **spec)


@task(name="score", cache_key_fn=_score_done)
def score_task(root: str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.score(root, key=key, **spec)


@task(name="analyze", cache_key_fn=_analysis_done)
def analyze_task(root: str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.analyze(root, key=key, **spec)
