"""Seconds per judge request on the embedded server at each n_threads: run by hand, not a test.

One captured judge request (PERSEVAL_CAPTURE_REQUESTS, e.g. from scripts/bench_pipeline.py --workdir) is sent
N times, one at a time, to a freshly started server per thread count. The same prompt again reuses the
server's prompt cache (only generation is timed after the first); --fresh-prompt defeats that:

    python scripts/bench_embedded_threads.py --config X.yaml --capture requests.jsonl --threads 1 2 --n 5
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perseval.experiment.load import load_experiment  # noqa: E402
from perseval.llm.client import CAPTURED_BODY  # noqa: E402
from perseval.llm.deployments import Deployment  # noqa: E402


def seconds_per_request(deployment: Deployment, request: dict, n: int, fresh: bool) -> list[float]:
    with deployment as ep:
        body = {"model": ep.served_model, **{k: request[k] for k in CAPTURED_BODY if request.get(k) is not None}}
        out = []
        for i in range(n):
            if fresh:  # a different first token: the server cannot reuse the last prompt's KV cache
                first = body["messages"][0]
                body["messages"] = [{**first, "content": f"[{i}:{time.time()}] {request['messages'][0]['content']}"},
                                    *request["messages"][1:]]
            t = time.monotonic()
            httpx.post(f"{ep.base_url}/chat/completions", json=body, timeout=ep.timeout_s).raise_for_status()
            out.append(round(time.monotonic() - t, 3))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--capture", required=True, type=Path)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--fresh-prompt", action="store_true",
                    help="prefix each prompt with a nonce, so each request pays its prompt processing as in a run")
    args = ap.parse_args()
    exp = load_experiment(args.config)
    request = next(r for r in map(json.loads, args.capture.read_text().splitlines()) if r["stage"] == "judge")
    model, dep = exp.models[request["model"]], exp.deployments[request["model"]]
    with TemporaryDirectory() as logs:
        for threads in args.threads:
            times = seconds_per_request(Deployment(model, dep.model_copy(update={"n_threads": threads}), logs),
                                        request, args.n, args.fresh_prompt)
            print(f"n_threads {threads}: {sum(times) / len(times):.2f} s per request {times} "
                  f"({request['prompt_tokens']} prompt tokens, max_tokens {request['max_tokens']})")


if __name__ == "__main__":
    main()
