"""What an experiment will really send, after every override: `perseval show CONFIG [--json]`.

`effective_settings` returns one plain mapping (JSON-ready) made from the same validated objects the plan
and the runner use, never from YAML lines: a component's params are its `Params` with every default filled
in, a role's sampling is the one the request cache keys on. Nothing is started. Layout:

  experiment            name, seed, repeats, path
  models/<name>         format, source, revision, dtype, quantization, sampling, deployment (kind, context...),
                        serving (what the client and server really use: concurrency, dialect, slots, threads)
  retrievers/<name>     kind, chunking (size, overlap), params
  benchmarks/<entry>    sample, seed, source, params (the benchmark's validated params, construction included),
                        construction_models (role -> model), agents/<name> (kind, params, needs, backbones,
                        retrievers), judges/<name> (kinds, params per kind, model, sampling, repeats)
  cells                 one row per cell: its name, parts and run / judge / score keys

`<entry>` is the name the entry's cells carry (perseval.experiment.entries): the benchmark's name, `name:<label>`, or
`name:<digest>` for an unlabelled entry of a benchmark listed twice.
Tests and the protocol sheets (docs/protocols/) address values by a path of these keys joined with '/'.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from perseval.llm.settings import ModelConfig
from perseval.experiment.config import ResolvedExperiment
from perseval.experiment.entries import entry_ids
from perseval.experiment.load import bound, judge_specs
from perseval.llm.embedded import serving
from perseval.kernel.params import EVERY_FIELD
from perseval.pipeline.plan import make_plan
from perseval.pipeline.units import Plan
from perseval.kernel.registry import benchmark_class

MISSING = object()


def _model(cfg: ModelConfig, exp: ResolvedExperiment) -> dict[str, Any]:
    dep = exp.deployments[cfg.name]
    return {"format": cfg.format, "source": cfg.source, "revision": cfg.revision, "digest": cfg.digest,
            "dtype": cfg.dtype, "quantization": cfg.quantization, "sampling": cfg.sampling.model_dump(mode="json"),
            "deployment": dep.model_dump(mode="json", exclude={"api_key_env"}), "serving": asdict(serving(dep))}


def entry_names(exp: ResolvedExperiment) -> list[str]:
    """The key of each benchmark entry under `benchmarks`: the name its cells carry (perseval.experiment.entries)."""
    return entry_ids(exp.experiment.benchmarks)


def _agents(exp: ResolvedExperiment, plan: Plan, index: int) -> dict[str, Any]:
    out = {}
    runs = [r for r in plan.runs() if r.data is plan.data[index]]
    for name in exp.experiment.benchmarks[index].agents:
        spec = bound(exp).agents[name]
        mine = [r for r in runs if r.agent.name == name]
        out[name] = {"kind": spec.kind, "params": spec.params.model_dump(mode="json", context=EVERY_FIELD),
                     "needs": sorted(str(n) for n in spec.needs), "roles": dict(spec.roles),
                     "backbones": sorted({r.backbone for r in mine if r.backbone}),
                     "retrievers": sorted({r.index.retriever.name for r in mine if r.index})}
    return out


def _judges(exp: ResolvedExperiment, index: int) -> dict[str, Any]:
    return {s.name: {"kinds": list(s.kinds),
                     "params": {k: p.model_dump(mode="json", context=EVERY_FIELD) for k, p in s.params.items()},
                     "model": s.model.name if s.model else None,
                     "sampling": s.sampling.model_dump(mode="json") if s.sampling and s.uses_llm else None,
                     "repeats": s.repeats if s.uses_llm else 1}
            for s in judge_specs(exp, index)}


def _benchmark(exp: ResolvedExperiment, plan: Plan, index: int) -> dict[str, Any]:
    entry = exp.experiment.benchmarks[index]
    params = bound(exp).benchmarks[index]
    return {"name": entry.name, "sample": entry.sample, "seed": plan.data[index].seed, "source": entry.source,
            "params": params.model_dump(mode="json", context=EVERY_FIELD),
            "construction_models": benchmark_class(entry.name).construction_models(params, exp.experiment.backbones),
            "agents": _agents(exp, plan, index), "judges": _judges(exp, index)}


def effective_settings(exp: ResolvedExperiment, plan: Plan | None = None) -> dict[str, Any]:
    """Every effective setting of the experiment's cells, as a plain mapping (see the module docstring)."""
    plan = plan or make_plan(exp)
    e = exp.experiment
    names = entry_names(exp)
    return {
        "experiment": {"name": e.name, "path": exp.path, "seed": e.seed, "repeats": e.repeats,
                       "backbones": list(e.backbones)},
        "models": {n: _model(m, exp) for n, m in exp.models.items()},
        "retrievers": {n: r.model_dump(mode="json", exclude={"name"}) for n, r in exp.retrievers.items()},
        "benchmarks": {names[i]: _benchmark(exp, plan, i) for i in range(len(e.benchmarks))},
        "cells": [{"name": c.name, "benchmark": names[c.bench_index], "agent": c.agent, "backbone": c.backbone,
                   "retriever": c.retriever, "judge": c.judge, "judge_model": c.judge_model,
                   "run_key": c.run.key, "judge_key": c.judged.key, "score_key": c.key} for c in plan.cells],
    }


def at_path(settings: dict[str, Any], path: str) -> Any:
    """The value at `a/b/c` in `settings` (a mapping, or a list indexed by position); MISSING if absent."""
    node: Any = settings
    for part in path.split("/"):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node
