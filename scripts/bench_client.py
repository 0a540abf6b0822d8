"""What perseval's LLM client costs per request, alone: run by hand, not a test.

N distinct requests through LLMClient (request cache included) against the stand-in server
(perseval.llm.standin, its own process), in clients of SHARD requests each (a new client per shard, as a run
task makes one) at a deployment's max_concurrency; prints requests/s and CPU milliseconds per request.

    python scripts/bench_client.py --shard 2000 125 --concurrency 16 64
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perseval.llm.cache import RequestCache  # noqa: E402
from perseval.llm.client import LLMClient  # noqa: E402
from perseval.llm.endpoint import Endpoint  # noqa: E402
from perseval.llm.settings import Sampling  # noqa: E402
from perseval.llm.standin import standin_process  # noqa: E402


def measure(url: str, n: int, shard: int, concurrency: int) -> tuple[float, float]:
    cache = RequestCache(Path(tempfile.mkdtemp()) / "cache.sqlite")
    endpoint = Endpoint("m", "openai", f"{url}/v1", "m", "m", max_concurrency=concurrency, timeout_s=30, retries=0)

    async def one_shard(k: int) -> None:
        client = LLMClient(endpoint, Sampling(temperature=0.0, max_tokens=64), cache, role="agent", run_id="b",
                           seed=1)
        try:
            await asyncio.gather(*(client.chat([{"role": "user", "content": f"request {k} {i}"}])
                                   for i in range(shard)))
        finally:
            await client.aclose()

    t0, c0 = time.monotonic(), time.process_time()
    for k in range(n // shard):
        asyncio.run(one_shard(k))
    return n / (time.monotonic() - t0), 1000 * (time.process_time() - c0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--shard", type=int, nargs="+", default=[2000, 125])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    args = ap.parse_args()
    with standin_process() as url:
        for shard in args.shard:
            for conc in args.concurrency:
                rate, cpu = measure(url, args.requests, shard, conc)
                print(f"shard {shard:5d}  concurrency {conc:3d}: {rate:6.0f} req/s, {cpu:5.2f} ms CPU per request")


if __name__ == "__main__":
    main()
