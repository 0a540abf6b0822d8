"""The IBA construct stage as plain functions of paths, keys and config dicts (tasks/construct.py wraps them).

Template mode writes under the same data key the evaluate flow computes for the
benchmark entry, so a build made here (streamed, memory-safe at full size) is
reused by `perseval run` as is. LLM mode has its own key: it hashes the models
of the three roles as well, so changing a model rebuilds, and nothing else does.
"""
from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.iba.export import write_build
from perseval.benchmarks.iba.llm_construct import LlmParams, Writers, write_llm_build
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.config import BenchmarkEntry, ModelConfig, ResolvedExperiment
from perseval.errors import ConfigError
from perseval.hashing import content_key
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.plan import STAGE_VERSIONS, model_fingerprint
from perseval.store import StageStore

ROLES = ("user", "assistant", "task")  # user simulator, assistant, task writer


def iba_entry(exp: ResolvedExperiment) -> BenchmarkEntry:
    """The experiment's IBA-Bench entry; construction needs one, built from scratch (no `source`)."""
    entries = [e for e in exp.experiment.benchmarks if e.name == "iba"]
    if not entries:
        raise ConfigError(f"{exp.path}: no benchmark entry named 'iba' to construct")
    if entries[0].source:
        raise ConfigError(f"{exp.path}: the iba entry has `source` set; construction builds data, it does not ingest")
    return entries[0]


def resolve_roles(exp: ResolvedExperiment, overrides: dict[str, str | None]) -> dict[str, str]:
    """Model name per role: the override, else the experiment's first backbone."""
    roles = {}
    for role in ROLES:
        name = overrides.get(role) or exp.experiment.backbones[0]
        if name not in exp.models:
            raise ConfigError(f"{exp.path}: construction role {role!r} names model {name!r}, which the experiment "
                              f"does not load (known: {sorted(exp.models)})")
        roles[role] = name
    return roles


def llm_data_key(entry: BenchmarkEntry, seed: int, models: dict[str, ModelConfig], llm: dict[str, Any]) -> str:
    fingerprints = {role: model_fingerprint(cfg) for role, cfg in sorted(models.items())}
    return content_key("data", STAGE_VERSIONS["data"], "iba-llm", entry.sample, seed, entry.params, fingerprints, llm)


def construct_template(root: str, key: str, *, bench_params: dict[str, Any], sample: int, seed: int,
                       part_size: int = 256) -> dict[str, Any]:
    bench = IbaBenchmark(bench_params)  # the same params the evaluate flow's construct would see
    return write_build(root, key, taxonomy=load_taxonomy(), sample=sample, seed=seed,
                       params=bench.construct_params, qa_probes=bench.qa_probes, part_size=part_size)


def construct_llm(root: str, key: str, *, bench_params: dict[str, Any], sample: int, seed: int,
                  roles: dict[str, dict[str, Any]], cache_path: str, run_id: str, llm: dict[str, Any] | None = None,
                  part_size: int = 64) -> dict[str, Any]:
    """`roles`: role -> {"model": ModelConfig dict, "endpoint": Endpoint dict} of a started deployment."""
    import asyncio

    done = StageStore(root, "data", key)
    if done.is_complete():  # no endpoint is started for a finished build
        return {"key": key, **done.manifest()}
    bench = IbaBenchmark(bench_params)
    llm_params = LlmParams.from_mapping(llm)

    async def work() -> dict[str, Any]:
        cache = RequestCache(cache_path)
        async with AsyncExitStack() as stack:
            clients = {}
            for role, spec in roles.items():
                client = LLMClient.for_model(Endpoint(**spec["endpoint"]), ModelConfig.model_validate(spec["model"]),
                                             cache, role=f"construct.{role}", run_id=run_id, seed=seed)
                stack.push_async_callback(client.aclose)
                clients[role] = client
            writers = Writers(clients["user"], clients["assistant"], clients["task"])
            return await write_llm_build(root, key, taxonomy=load_taxonomy(), sample=sample, seed=seed,
                                         params=bench.construct_params, writers=writers, llm_params=llm_params,
                                         qa_probes=bench.qa_probes, part_size=part_size)

    return asyncio.run(work())
