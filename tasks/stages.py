"""Prefect tasks: thin wrappers of perseval.pipeline.stages, one per stage unit.

Tasks take typed units (perseval.pipeline.plan) and the flow run's Runtime, and return
small dicts: paths and keys travel, never frames, models or clients, so they
pickle cheaply to Dask workers. The content-addressed store is the cache: the
flow submits only the units perseval.pipeline.freshness finds missing, stale or holding
failures, so Prefect's own result cache is not used (it could not see a deleted
or stale output and would return an old result for it).
"""
from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from perseval.pipeline import stages
from perseval.pipeline import probes
from perseval.pipeline.units import AnalysisUnit, Cell, DataUnit, IndexUnit, JudgeUnit, RunUnit
from perseval.pipeline.stages import Runtime
from perseval_tasks.own_warnings import show_if_asked

show_if_asked()  # a Dask worker imports this module to run a task: it says perseval's warnings as the CLI does


@task(name="construct", cache_policy=NO_CACHE, task_run_name="construct {unit.name}")
def construct_task(unit: DataUnit, rt: Runtime) -> dict[str, Any]:
    return stages.construct(unit, rt)


@task(name="index-shard", cache_policy=NO_CACHE, task_run_name="index {unit.data.name} {unit.retriever.name} #{shard}")
def index_task(unit: IndexUnit, shard: int, owners: stages.OwnerRange, rt: Runtime) -> dict[str, Any]:
    return stages.index_shard(unit, shard, owners, rt)


@task(name="run-shard", cache_policy=NO_CACHE, task_run_name="run {unit.label} #{shard}")
def run_shard_task(unit: RunUnit, shard: int, rt: Runtime) -> dict[str, Any]:
    return stages.run_shard(unit, shard, rt)


@task(name="judge-shard", cache_policy=NO_CACHE, task_run_name="judge {unit.run.label} {unit.judge.name} #{shard}")
def judge_task(unit: JudgeUnit, shard: int, rt: Runtime) -> dict[str, Any]:
    return stages.judge(unit, shard, rt)


@task(name="score", cache_policy=NO_CACHE, task_run_name="score {cell.name}")
def score_task(cell: Cell, rt: Runtime) -> dict[str, Any]:
    return stages.score(cell, rt)


@task(name="analyze", cache_policy=NO_CACHE, task_run_name="analyze {unit.data.name}")
def analyze_task(unit: AnalysisUnit, rt: Runtime) -> dict[str, Any]:
    return stages.analyze(unit, rt)


@task(name="probe", cache_policy=NO_CACHE, task_run_name="probe {unit.data.name} {unit.judge.name}")
def probe_task(unit: probes.ProbeUnit, rt: Runtime) -> dict[str, Any]:
    return probes.probe(unit, rt)
