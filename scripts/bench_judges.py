"""Judge candidates side by side on the quickstart's probe sets: probe AUC with DeLong's interval from the text
verdicts and from P(true), and seconds per judgment (issue 44; docs/guides/performance.md).

Each candidate GGUF is served by the venv's llama-server (one slot, --threads cores) as the embedded
deployment serves it (llama.cpp grammar, repeat penalty 1.1), and judges the answers of known verdict that
`perseval run` probes (perseval.pipeline.probes) for every LLM judge of configs/experiments/quickstart.yaml,
with the quickstart judge's sampling and prompts. One request per judged item gives both readings: the
text verdict is the word the grammar let through, P(true) the verdict token's probabilities (the same
greedy answer, so the two share their seconds). `--n` probe instances per benchmark (the quickstart's own
judge_probes by default); more give a narrower interval.

  python scripts/bench_judges.py --gguf smollm2-135m=PATH [--gguf gemma3-270m=PATH] [--n 4] [--threads 2]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from perseval.benchmarks.base import build_all
from perseval.core.parsing import parse_binary
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.embedded import REPEAT_PENALTY, llama_server_binary
from perseval.llm.endpoint import Endpoint
from perseval.metrics.auc import auc_interval
from perseval.pipeline.probes import judge_probes, probe_answers
from perseval.experiment.components import make_judges
from perseval.experiment.load import judge_specs, load_experiment
from perseval.kernel.registry import benchmark_class

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "experiments" / "quickstart.yaml"
PORT = 18790


def serve(gguf: Path, threads: int, port: int) -> subprocess.Popen:
    cmd = [str(llama_server_binary()), "--model", str(gguf), "--alias", "judge", "--host", "127.0.0.1", "--port",
           str(port), "--parallel", "1", "--ctx-size", "4096", "--threads", str(threads), "--threads-batch",
           str(threads), "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"llama-server did not come up on {gguf}")


def probe_sets(n: int | None) -> list[tuple[str, Any, list[Any], int]]:
    """(benchmark, judge spec, instances, n) of every probed LLM judge of the quickstart."""
    exp = load_experiment(QUICKSTART)
    out = []
    for bi, entry in enumerate(exp.experiment.benchmarks):
        for spec in judge_specs(exp, bi):
            probed = benchmark_class(entry.name).probed_items
            if not (spec.uses_llm and any(j.item in probed for j in make_judges(spec))):
                continue
            bench = benchmark_class(entry.name)(entry.params)
            data = build_all(bench, sample=entry.sample, seed=entry.seed or exp.experiment.seed, source=None)
            out.append((entry.name, spec, data.instances, n or exp.experiment.judge_probes))
    return out


async def judge_set(url: str, name: str, spec: Any, instances: list[Any], n: int, seed: int,
                    cache: Path) -> tuple[list[Any], float]:
    endpoint = Endpoint(name, "embedded", url, "judge", f"bench:{name}", None, 1, 600.0, 0, "gbnf",
                        extra_body={"repeat_penalty": REPEAT_PENALTY})
    client = LLMClient(endpoint, spec.sampling, RequestCache(cache), role="judge", run_id="bench", seed=seed)
    t0 = time.monotonic()
    try:
        return await judge_probes(spec, client, instances, n, seed), time.monotonic() - t0
    finally:
        await client.aclose()


def readings(judgments: list[Any], labels: dict[tuple[str, str, str], int]) -> dict[str, Any]:
    items = [j for j in judgments if (j.agent, j.instance_id, j.item_id) in labels and j.status == "scored"]
    ys = [labels[(j.agent, j.instance_id, j.item_id)] for j in items]
    # a verdict given without asking the model (an empty response's claims, by rule) is its 0/1 score
    text = [parse_binary(j.raw, structured=True)[0] or 0.0 if j.method else j.score for j in items]
    probs = [j.p_true if j.method else j.score for j in items]
    row: dict[str, Any] = {"items": len(items), "good": sum(ys), "bad": len(ys) - sum(ys),
                           "unscored": sum(1 for j in judgments if j.status != "scored"),
                           "asked": sum(1 for j in items if j.method),
                           "with_p_true": sum(j.p_true is not None for j in items)}
    bad = [p for p, y in zip(probs, ys) if y == 0 and p is not None]
    row["bad_passed_at_0.5"] = f"{sum(p >= 0.5 for p in bad)}/{len(bad)}"
    for key, values in (("text", text), ("p_true", probs)):
        auc = auc_interval(ys, values) if all(v is not None for v in values) else None
        row[key] = None if auc is None else [round(auc.auc, 3), round(auc.ci_low, 3), round(auc.ci_high, 3)]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", action="append", required=True, help="NAME=PATH of a candidate judge GGUF")
    ap.add_argument("--n", type=int, default=None, help="probe instances per benchmark (default: the quickstart's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=PORT)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    sets = probe_sets(args.n)
    results = []
    for arg in args.gguf:
        name, path = arg.split("=", 1)
        proc = serve(Path(path), args.threads, args.port)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                for bench, spec, instances, n in sets:
                    judgments, seconds = asyncio.run(judge_set(f"http://127.0.0.1:{args.port}/v1", name, spec,
                                                               instances, n, args.seed, Path(tmp) / "c.sqlite"))
                    _, labels = probe_answers(instances, n, args.seed)
                    row = {"judge": name, "benchmark": bench, "n_instances": n, **readings(judgments, labels),
                           "s_per_judgment": round(seconds / max(len(judgments), 1), 2)}
                    results.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
