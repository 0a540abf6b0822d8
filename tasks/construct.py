"""Prefect tasks of the IBA construct flow: thin, cached wrappers of perseval.benchmarks.iba.stage.

They take and return paths, keys and small dicts (endpoints as plain dicts, never
clients). The cache key is the data key, offered only once its manifest exists,
as for the evaluate flow's construct task.
"""
from __future__ import annotations

from typing import Any

from prefect import task

from perseval.benchmarks.iba import stage
from tasks.stages import _cached_when, _complete


@task(name="construct-iba-template", cache_key_fn=_cached_when("data", _complete("data")))
def construct_template_task(root: str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    return stage.construct_template(root, key, **spec)


@task(name="construct-iba-llm", cache_key_fn=_cached_when("data", _complete("data")))
def construct_llm_task(root: str, key: str, spec: dict[str, Any]) -> dict[str, Any]:
    return stage.construct_llm(root, key, **spec)
