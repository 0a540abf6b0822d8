"""The IBA-Bench construct flow: build the benchmark data once, in template or LLM mode.

    construct("configs/experiments/gpu.yaml")                       # template text
    construct("configs/experiments/gpu.yaml", mode="llm",           # models write the text
              user_model="qwen3-4b-instruct", task_model="qwen3-30b-a3b-instruct")

The experiment file's `iba` entry gives sample, seed and params (`full_size: true`
for the paper's 6,962 instances). Template mode writes under the data key the
evaluate flow uses for that entry, so a later `perseval run` reuses it. LLM mode
serves the role models (default: the first backbone for every role) only when
its output is not already in the store, and stops them when it ends.
"""
from __future__ import annotations

import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from prefect import flow

from perseval.benchmarks.iba.stage import iba_entry, llm_data_key, resolve_roles
from perseval.config import load_experiment
from perseval.errors import ConfigError
from perseval.llm.deployments import Deployment
from perseval.plan import data_key, entry_seed
from perseval.store import StageStore
from tasks.construct import construct_llm_task, construct_template_task


@flow(name="perseval-construct-iba", log_prints=True)
def construct(config_path: str, mode: str = "template", output_root: str | None = None,
              user_model: str | None = None, assistant_model: str | None = None, task_model: str | None = None,
              llm: dict[str, Any] | None = None, part_size: int | None = None) -> dict[str, Any]:
    """Build the experiment's IBA-Bench data; returns the data manifest with its key."""
    exp = load_experiment(config_path)
    entry = iba_entry(exp)
    seed, root = entry_seed(exp, entry), output_root or exp.experiment.output_root
    base = {"bench_params": entry.params, "sample": entry.sample, "seed": seed}
    if mode == "template":
        return construct_template_task(root, data_key(entry, seed), {**base, "part_size": part_size or 256})
    if mode != "llm":
        raise ConfigError(f"construct: mode must be 'template' or 'llm', not {mode!r}")
    roles = resolve_roles(exp, {"user": user_model, "assistant": assistant_model, "task": task_model})
    key = llm_data_key(entry, seed, {r: exp.models[n] for r, n in roles.items()}, llm or {})
    spec = {**base, "llm": llm or {}, "part_size": part_size or 64, "run_id": uuid.uuid4().hex,
            "cache_path": exp.experiment.request_cache or str(Path(root) / "request-cache.sqlite")}
    with ExitStack() as stack:
        endpoints: dict[str, dict[str, Any]] = {}
        if not StageStore(root, "data", key).is_complete():  # a finished build needs no server
            for name in sorted(set(roles.values())):
                endpoints[name] = stack.enter_context(Deployment(exp.models[name], Path(root) / "logs")).to_dict()
        spec["roles"] = {r: {"model": exp.models[n].model_dump(), "endpoint": endpoints.get(n)}
                         for r, n in roles.items()}
        return construct_llm_task(root, key, spec)
