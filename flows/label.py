"""`perseval label-sample`: the IBA validation sample written for raters, and optionally labelled by a
model that this command serves for the purpose (and stops)."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from perseval.benchmarks.iba import label_sample as ls
from perseval.setup.config import ResolvedExperiment
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import ServerPool
from perseval.pipeline.plan import Plan
from perseval.pipeline.stages import load_documents, load_instances


def label_sample(exp: ResolvedExperiment, plan: Plan, root: str, n: int, out_dir: Path, model: str | None,
                 repeats: int) -> list[Path]:
    """Files written: per IBA entry a label template and instance views, and with `model` its label files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    units = [u for u in plan.data if u.entry.name == "iba"]
    samples = {f"iba{i}" if len(units) > 1 else "iba":
               ls.pick(load_instances(root, u.key), load_documents(root, u.key), n, u.seed)
               for i, u in enumerate(units)}
    paths = [p for name, s in samples.items() for p in ls.write_for_raters(s, out_dir, name)]
    if model is None:
        return paths
    cache = exp.experiment.request_cache or str(Path(root) / "request-cache.sqlite")
    with ServerPool(exp.models, exp.deployments, Path(root) / "logs") as pool:
        endpoint = pool.ensure({model})[model]
        client = LLMClient(endpoint, exp.models[model].sampling, RequestCache(cache), role="label",
                           run_id=uuid.uuid4().hex, seed=exp.experiment.seed)

        async def work() -> list[Path]:
            try:
                return [p for name, s in samples.items()
                        for p in await ls.write_judge_labels(client, s, out_dir, name, repeats)]
            finally:
                await client.aclose()

        return paths + asyncio.run(work())
