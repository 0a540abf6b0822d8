"""Co-tenant speed of the embedded server (issue 45): run by hand, not a test.

Several perseval runs on one machine each start a llama-server. This starts 1, 2 and 3 of them at once, as
perseval starts them (perseval.llm.deployments.Deployment on the shipped SmolLM2 deployment), under each
OpenMP setting below, and sends every server the same fixed request at the same moment, several times. Each
answer's own timings (llama-server's prompt_per_second and predicted_per_second, per sequence) give prefill
and decode tok/s; the prompt is not taken from any cache (cache_prompt: false), so every request prefills.
Per configuration: per-server tok/s (min/median/max over servers and repetitions) and the servers' sum
(median over repetitions), and that sum as a share of one server alone under the same setting and under
OpenMP's default.

Settings: `default` (OpenMP's own wait: spin, then sleep), `passive` (OMP_WAIT_POLICY=PASSIVE: sleep at
once), `spin10k` and `spin1k` (GOMP_SPINCOUNT=10000 or 1000: a short spin, then sleep), `free-cores` (default
wait, each server on cores // N threads, the cores left to it), `rule` (what perseval starts by itself:
perseval.llm.deployments.shared_machine_env, PASSIVE on a shared machine).

    python scripts/bench_cotenant.py --reps 5 --json cotenant.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.llm import deployments  # noqa: E402
from perseval.llm.deployments import Deployment  # noqa: E402
from perseval.llm.embedded import cores  # noqa: E402

SETTINGS: dict[str, dict[str, str]] = {"default": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
                                       "spin10k": {"GOMP_SPINCOUNT": "10000"}, "spin1k": {"GOMP_SPINCOUNT": "1000"},
                                       "free-cores": {}, "rule": {}}
SHIPPED_RULE = deployments.shared_machine_env
OMP_VARS = deployments.OMP_SETTINGS
# a fixed prompt of a few hundred tokens and a fixed answer length: the same work for every server
PROMPT = ("Here are a user's notes on planning a week. " + "Mondays start with a run, then email; Tuesday "
          "afternoons are for reading papers; Wednesdays hold team meetings and a long lunch; Thursday is "
          "writing; Friday ends early for the market. " * 8 + "Write a short plan for next week.")
MAX_TOKENS = 48


def load(kind: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "configs" / kind / f"{name}.yaml").read_text())


def ask(base_url: str, model: str, out: list, at: float) -> None:
    time.sleep(max(0.0, at - time.time()))  # every server gets its request at the same moment
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS,
            "temperature": 0.0, "cache_prompt": False, "ignore_eos": True}
    t = httpx.post(f"{base_url}/chat/completions", json=body, timeout=900).json()["timings"]
    out.append((t["prompt_per_second"], t["predicted_per_second"]))


def one_config(setting: str, n: int, reps: int, log_dir: Path) -> dict[str, Any]:
    model = ModelConfig(**load("models", "smollm2-135m"))
    fields = load("deployments", model.deployment)
    if setting == "free-cores":
        fields["n_threads"] = max(1, cores() // n)
    dep = DeploymentConfig(**fields)
    # each setting as named; `rule`: what perseval chooses by itself (shared_machine_env)
    deployments.shared_machine_env = SHIPPED_RULE if setting == "rule" else (lambda env: {})
    saved = {k: os.environ.pop(k, None) for k in OMP_VARS}
    os.environ.update(SETTINGS[setting])
    try:
        with ExitStack() as stack:
            urls = [stack.enter_context(Deployment(model, dep, log_dir)).base_url for _ in range(n)]
            for url in urls:  # a first request each: weights paged in, threads started
                ask(url, model.name, [], 0)
            per_server, sums = [], []
            for _ in range(reps):
                out: list = []
                at = time.time() + 0.5
                threads = [threading.Thread(target=ask, args=(u, model.name, out, at)) for u in urls]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
                per_server += out
                sums.append((sum(p for p, _ in out), sum(d for _, d in out)))
    finally:
        for k in OMP_VARS:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})

    def spread(xs: list[float]) -> dict[str, float]:
        return {"min": round(min(xs), 1), "median": round(statistics.median(xs), 1), "max": round(max(xs), 1)}

    return {"setting": setting, "servers": n, "threads": dep.n_threads or cores(),
            "prefill": spread([p for p, _ in per_server]), "decode": spread([d for _, d in per_server]),
            "sum_prefill": round(statistics.median(p for p, _ in sums), 1),
            "sum_decode": round(statistics.median(d for _, d in sums), 1)}


def table(rows: list[dict[str, Any]]) -> str:
    alone = {r["setting"]: r for r in rows if r["servers"] == 1}
    best = alone.get("default", rows[0])
    lines = ["| setting | servers | threads each | decode tok/s per server (min / median / max) | prefill tok/s per "
             "server (min / median / max) | all servers: decode, prefill (share of one alone, same setting; of "
             "default alone) |", "|---|---|---|---|---|---|"]
    for r in rows:
        own = alone.get(r["setting"], best)
        share = (f"{r['sum_decode']:.0f}, {r['sum_prefill']:.0f} ({r['sum_decode'] / own['sum_decode']:.0%}, "
                 f"{r['sum_prefill'] / own['sum_prefill']:.0%}; {r['sum_decode'] / best['sum_decode']:.0%}, "
                 f"{r['sum_prefill'] / best['sum_prefill']:.0%})")
        d, p = r["decode"], r["prefill"]
        lines.append(f"| {r['setting']} | {r['servers']} | {r['threads']} | {d['min']} / {d['median']} / {d['max']} "
                     f"| {p['min']} / {p['median']} / {p['max']} | {share} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="requests per server per configuration")
    ap.add_argument("--servers", default="1,2,3", help="how many servers at once, comma-separated")
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"of {', '.join(SETTINGS)}")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        for setting in args.settings.split(","):
            for n in (int(x) for x in args.servers.split(",")):
                rows.append(one_config(setting, n, args.reps, Path(logs)))
                print(json.dumps(rows[-1]), flush=True)
    print(f"cores: {cores()}, load average before the last configuration ended: {os.getloadavg()}")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
