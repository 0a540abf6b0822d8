"""How much of IBA-Agent's salience and rating prefill llama-server takes from its prompt cache: run by hand.

    PYTHONPATH=. .venv/bin/python scripts/measure_prompt_cache.py                  # this tree's prompts
    PYTHONPATH=/path/to/old/checkout .venv/bin/python scripts/measure_prompt_cache.py  # another tree's

For each instance of the release (default: tests/data/iba_outside_release), the salience prompt and then the
rating prompt of each of its user's first `--passages` history turns, sent one after another as IBA-Agent
sends them (one slot, temperature 0, one token answered: only the prefill is measured) to a fresh embedded
llama-server (configs/deployments/llama-cpp-embedded.yaml's SmolLM2-135M). llama-server says per request how
many prompt tokens it took from its cache (`timings.cache_n`) and how many it computed (`prompt_n`). The
script imports whichever perseval is first on PYTHONPATH, so the same file measures the prompts of a
checkout before and after a change. Prints one JSON line per prompt kind and a total.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import httpx

from perseval.benchmarks.iba.agents.iba_agent import prompts
from perseval.benchmarks.iba.release import IBA_LAYOUT
from perseval.llm.deployments import Deployment
from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.config import load_config

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, default=REPO / "tests" / "data" / "iba_outside_release")
    ap.add_argument("--sample", type=int, default=6)
    ap.add_argument("--passages", type=int, default=8, help="history turns per instance")
    ap.add_argument("--chars", type=int, default=300, help="each turn clipped to this, as the agent shows it")
    args = ap.parse_args()
    data = IBA_LAYOUT.load(args.source)
    owners: dict[str, list[str]] = {}
    for d in data.documents:
        owners.setdefault(d.owner, []).append(d.text[:args.chars])
    model = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")
    deployment = load_config(DeploymentConfig, CONFIGS / "deployments" / f"{model.deployment}.yaml")
    totals: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, Deployment(model, deployment, Path(tmp)) as endpoint:
        with httpx.Client(base_url=endpoint.base_url, timeout=300) as http:
            for inst in data.instances[:args.sample]:
                for passage in owners.get(inst.user_id, [])[:args.passages]:
                    for kind, build in (("salience", prompts.salience_messages), ("rating", prompts.rating_messages)):
                        t0 = time.monotonic()
                        body = {"model": endpoint.served_model, "messages": build(inst.query, passage),
                                "max_tokens": 1, "temperature": 0.0, "seed": 0}
                        timings = http.post("/chat/completions", json=body).raise_for_status().json()["timings"]
                        row = totals.setdefault(kind, {"requests": 0, "cache_n": 0, "prompt_n": 0, "seconds": 0.0})
                        row["requests"] += 1
                        row["cache_n"] += timings.get("cache_n", 0)
                        row["prompt_n"] += timings["prompt_n"]
                        row["seconds"] += time.monotonic() - t0
    all_rows = {"total": {k: sum(r[k] for r in totals.values()) for k in ("requests", "cache_n", "prompt_n", "seconds")}}
    for kind, row in {**totals, **all_rows}.items():
        prompt = row["cache_n"] + row["prompt_n"]
        print(json.dumps({"prompts": kind, "prompts_file": prompts.__file__, **row,
                          "seconds": round(row["seconds"], 1), "prefill_saved": round(row["cache_n"] / prompt, 3)}))


if __name__ == "__main__":
    main()
