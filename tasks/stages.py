"""Prefect tasks: thin, cached wrappers of perseval.stages, one per stage unit.

Tasks take and return paths, keys and small dicts, never frames or clients, so
they pickle cheaply to Dask workers. The Prefect cache key is the unit's
content key, offered only once its Parquet output exists: a unit whose output
was deleted is recomputed even if Prefect remembers an old result.
"""
from __future__ import annotations

from typing import Any, Callable

from prefect import task
from prefect.context import TaskRunContext

from perseval import stages
from perseval.store import StageStore


def _cached_when_written(stage: str) -> Callable[[TaskRunContext, dict[str, Any]], str | None]:
    def key_fn(_ctx: TaskRunContext, params: dict[str, Any]) -> str | None:
        store = StageStore(params["root"], stage, params["key"])
        shard = params.get("shard")
        done = store.has_part(shard) if shard is not None else store.is_complete()
        return f"perseval-{stage}-{params['key']}-{shard}" if done else None

    return key_fn


@task(name="construct", cache_key_fn=_cached_when_written("data"), retries=0)
def construct_task(root: str, entry: dict[str, Any], seed: int, key: str) -> dict[str, Any]:
    return stages.construct(root, entry, seed, key)


@task(name="index", cache_key_fn=_cached_when_written("index"))
def index_task(root: str, dkey: str, retriever: dict[str, Any], key: str) -> dict[str, Any]:
    return stages.index(root, dkey, retriever, key)


@task(name="run-shard", cache_key_fn=_cached_when_written("run"))
def run_shard_task(root: str, key: str, shard: int, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.run_shard(root, key=key, shard=shard, **spec)


@task(name="judge-shard", cache_key_fn=_cached_when_written("judge"))
def judge_task(root: str, key: str, shard: int, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.judge(root, key=key, shard=shard, **spec)


@task(name="score", cache_key_fn=_cached_when_written("score"))
def score_task(root: str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.score(root, key=key, **spec)


@task(name="analyze", cache_key_fn=_cached_when_written("analysis"))
def analyze_task(root: str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    return stages.analyze(root, key=key, **spec)
