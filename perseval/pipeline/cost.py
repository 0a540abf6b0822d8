"""What a cell cost: tokens in and out, LLM seconds, wall seconds and, where a model YAML gives a price, dollars.

Every LLM client tallies its requests in a Usage: those sent to the server, with
the token counts the server reported (`usage`) and their latency, apart from
those the request cache answered, which cost nothing new but keep the usage and
latency of the request that first produced them. A run or judge shard stores its
tally, its wall seconds and the id of the flow run that computed it in the
metadata of its Parquet part (a data unit in its manifest), so a report can say
both what a cell's outputs cost when they were made ("total") and what this run
spent on them ("this run": parts computed by this run, requests it sent).

Prices are reporting only: no key includes them (perseval.pipeline.plan hashes a model's
identity and sampling), so adding one invalidates nothing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from perseval.llm.settings import DeploymentConfig, Price
from perseval.llm.usage import Usage
from perseval.core.store import StageStore

if TYPE_CHECKING:
    from perseval.llm.settings import ModelConfig
    from perseval.experiment.config import ResolvedExperiment
    from perseval.pipeline.units import Plan

USAGE_INFO = "usage"  # the key of a part's tally in its Parquet metadata (perseval.core.store part_info)


def unit_record(run_id: str, wall_seconds: float, usages: list[Usage]) -> dict[str, Any]:
    """What a computed unit stores about its cost: who computed it, how long it took, its requests."""
    total = sum(usages, Usage())
    return {"run_id": run_id, "wall_seconds": round(wall_seconds, 3),
            **{k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(total).items()}}


def devices(deployment: DeploymentConfig) -> int:
    """How many devices a per-GPU-hour price is paid for: a vLLM deployment's GPUs; an embedded server is one."""
    return deployment.vllm.tensor_parallel_size if deployment.kind == "vllm" else 1


def dollars(price: Price | None, n_devices: int, tokens_in: float, tokens_out: float, seconds: float) -> float | None:
    if price is None:
        return None
    return (tokens_in * price.input_per_mtok + tokens_out * price.output_per_mtok) / 1e6 \
        + seconds / 3600 * n_devices * price.per_gpu_hour


@dataclass
class Spend:
    """What some stage units cost: in total (as made, cache hits at their original usage) and this run."""

    tokens_in: int = 0
    tokens_out: int = 0
    llm_seconds: float = 0.0
    wall_seconds: float = 0.0
    cost_usd: float | None = None  # None: no model involved has a price
    new_tokens_in: int = 0  # sent by this run
    new_tokens_out: int = 0
    new_llm_seconds: float = 0.0
    new_wall_seconds: float = 0.0  # units this run computed
    new_cost_usd: float | None = None
    requests: int = 0  # sent by this run (failed ones included)
    cache_hits: int = 0  # requests of this run's units answered by the request cache
    unrecorded: int = 0  # units whose outputs carry no record (written before cost accounting)

    @classmethod
    def of_records(cls, records: list[dict[str, Any] | None], run_id: str, price: Price | None = None,
                   n_devices: int = 1) -> "Spend":
        out = cls()
        for rec in records:
            if rec is None:
                out.unrecorded += 1
                continue
            u, wall = Usage.of(rec), float(rec.get("wall_seconds") or 0.0)
            part = cls(tokens_in=u.tokens_in + u.cached_tokens_in, tokens_out=u.tokens_out + u.cached_tokens_out,
                       llm_seconds=u.llm_seconds + u.cached_llm_seconds, wall_seconds=wall)
            part.cost_usd = dollars(price, n_devices, part.tokens_in, part.tokens_out, wall)
            if rec.get("run_id") == run_id:  # computed by this run: what it sent is new, its cache hits are not
                part.new_tokens_in, part.new_tokens_out, part.new_llm_seconds = u.tokens_in, u.tokens_out, u.llm_seconds
                part.new_wall_seconds, part.requests, part.cache_hits = wall, u.requests + u.failed, u.cached
                part.new_cost_usd = dollars(price, n_devices, u.tokens_in, u.tokens_out, wall)
            else:
                part.new_cost_usd = dollars(price, n_devices, 0, 0, 0)
            out = out + part
        if price is not None and out.cost_usd is None:
            out.cost_usd = out.new_cost_usd = 0.0  # priced, but nothing recorded yet
        return out

    def __add__(self, other: "Spend") -> "Spend":
        def add(a: Any, b: Any) -> Any:
            return b if a is None else a if b is None else a + b

        return Spend(**{f.name: add(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)})

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """MLflow metrics: `tokens_in`, `tokens_out`, `llm_seconds`, `wall_seconds`, `cost_usd` (when priced) for
        the total, `this_run.*` for what this run spent; under `prefix` (a stage) when given."""
        total = {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "llm_seconds": self.llm_seconds,
                 "wall_seconds": self.wall_seconds, "cost_usd": self.cost_usd}
        new = {"tokens_in": self.new_tokens_in, "tokens_out": self.new_tokens_out,
               "llm_seconds": self.new_llm_seconds, "wall_seconds": self.new_wall_seconds,
               "cost_usd": self.new_cost_usd, "requests": self.requests, "cache_hits": self.cache_hits}
        head = f"{prefix}." if prefix else ""
        out = {f"{head}{k}": float(v) for k, v in total.items() if v is not None}
        out |= {f"{head}this_run.{k}": float(v) for k, v in new.items() if v is not None}
        if self.unrecorded:
            out[f"{head}unrecorded_units"] = float(self.unrecorded)
        return out

    def row(self) -> dict[str, Any]:
        """The compact form for the headline table and the run summary."""
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "llm_seconds": round(self.llm_seconds, 2),
                "wall_seconds": round(self.wall_seconds, 2), "cost_usd": _round(self.cost_usd),
                "new_tokens_in": self.new_tokens_in, "new_tokens_out": self.new_tokens_out,
                "new_cost_usd": _round(self.new_cost_usd)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass
class PlanCost:
    """Per cell: its run and judge stages and the cell's sum (with its scoring); per data unit its construction,
    per index unit its build; and the run's total over distinct units (cells sharing a run count it once)."""

    # cell key -> {"run", "judge", "score", "cell"}; "cell" counts a run shared by several cells (one agent run,
    # several judges) only in the first of them, so the cells' rows add up to the run's total
    cells: dict[str, dict[str, Spend]]
    construct: dict[str, Spend]  # data key -> construction
    index: dict[str, Spend]  # index key -> build (wall seconds only: no LLM)
    total: Spend

    def by_benchmark(self, plan: "Plan") -> dict[str, Spend]:
        """Construction per benchmark entry, by the name its cells carry (perseval.experiment.entries)."""
        out: dict[str, Spend] = {}
        for u in plan.data:
            out[u.name] = out.get(u.name, Spend()) + self.construct[u.key]
        return out

    def summary(self, plan: "Plan") -> dict[str, Any]:
        return {"total": self.total.row(),
                "construct": {name: s.row() for name, s in self.by_benchmark(plan).items()},
                "index": {f"{u.data.name}/{u.retriever.name}": self.index[u.key].row() for u in plan.index},
                "cells": {c.name: {stage: s.row() for stage, s in self.cells[c.key].items()} for c in plan.cells}}


def _pricing(exp: "ResolvedExperiment", model: "ModelConfig | None") -> tuple[Price | None, int]:
    if model is None:
        return None, 1
    return model.price, devices(exp.deployments[model.name])


def plan_cost(exp: "ResolvedExperiment", plan: "Plan", records: "UnitRecords", run_id: str) -> PlanCost:
    """What every cell, every construction and index, and the whole run cost, from the records units stored."""
    runs = {r.key: Spend.of_records(records.parts("run", r.key, r.data.key), run_id, *_pricing(exp, r.model))
            for r in plan.runs()}
    judges = {j.key: Spend.of_records(records.parts("judge", j.key, j.run.data.key), run_id, *_pricing(exp, j.model))
              for j in plan.judgings()}
    construct = {}
    for u in plan.data:
        manifest = records.manifest("data", u.key)
        by_role = manifest.get(USAGE_INFO, {})
        # each role's server is held for the whole build (its record carries the build's wall seconds for a
        # GPU-hour price); the build's wall seconds are counted once
        spend = sum((Spend.of_records([by_role.get(role)], run_id, *_pricing(exp, m))
                     for role, m in u.construction.items()), Spend())
        construct[u.key] = replace(spend, **_wall(manifest, run_id))
    index = {u.key: Spend(**_wall(records.manifest("index", u.key), run_id)) for u in plan.index}
    cells, counted = {}, set()
    for c in plan.cells:
        run, judge = runs[c.run.key], judges[c.judged.key]
        score = Spend(**_wall(records.manifest("score", c.key), run_id))
        own = run if c.run.key not in counted else Spend()  # the run's cost belongs to the run: counted once
        counted.add(c.run.key)
        cells[c.key] = {"run": run, "judge": judge, "score": score, "cell": own + judge + score}
    total = sum([*runs.values(), *judges.values(), *construct.values(), *index.values(),
                 *(cells[c.key]["score"] for c in plan.cells)], Spend())
    return PlanCost(cells, construct, index, total)


def _wall(manifest: dict[str, Any], run_id: str) -> dict[str, float]:
    """A manifest's wall seconds (data, index and score units record `seconds` and the run that made them)."""
    wall = float(manifest.get("seconds") or 0.0)
    return {"wall_seconds": wall, "new_wall_seconds": wall if manifest.get("run_id") == run_id else 0.0}


class UnitRecords:
    """Reads the records units stored: run and judge parts' Parquet metadata, data/index/score manifests."""

    def __init__(self, root: str, shard_ids: dict[str, list[int]]):
        self.root, self.shard_ids = root, shard_ids

    def parts(self, stage: str, key: str, dkey: str) -> list[dict[str, Any] | None]:
        store = StageStore(self.root, stage, key)
        return [store.part_info(s).get(USAGE_INFO) if store.has_part(s) else None for s in self.shard_ids[dkey]]

    def manifest(self, stage: str, key: str) -> dict[str, Any]:
        store = StageStore(self.root, stage, key)
        return store.manifest() if store.is_complete() else {}
