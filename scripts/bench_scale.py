"""The pipeline at the server's speed: run by hand, not a test.

A LaMP-layout release (LaMP-2 and LaMP-4, N questions each, 40 profile items per user, written in the
official file layout) runs through the real pipeline (`perseval run`, a child process in its own working
folder: its own output root, MLflow SQLite and Prefect home) against the stand-in OpenAI-compatible server
(perseval.llm.standin, a process of its own that answers at once), with the agents oracle, no-profile and
BM25 top-k, the swapped-history control and LaMP's rule judge: 3 LLM requests per instance. Beside it, a plain
async client sends the same number of requests to the same server at the same concurrency. Per size it prints
each stage's seconds, the run stage's requests/s and its ratio to the plain client, the seconds outside every
stage, peak RSS of the run's process tree and MB per 1k instances; then a cached re-run (requests, wall).

    python scripts/bench_scale.py --sizes 2000 20000 --json scale.json
    python scripts/bench_scale.py --sizes 400 --concurrency 64 --shard-size 8     # the old default shard size
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_pipeline import child_env  # noqa: E402  (scripts/, this script's folder)
from perseval.llm.standin import standin_process  # noqa: E402

PROFILE_ITEMS = 40
TAGS = ("sci-fi", "comedy", "action", "romance", "classic", "fantasy", "dystopia", "true story")
WORDS = ("river station council budget vote cycle lane school market harbour festival museum bridge library "
         "storm garden rail tram tower park film ship star crew robot moon detective novel city").split()


def words(rng: random.Random, n: int) -> str:
    """`n` words drawn from WORDS: the generated releases' text (bench_releases.py writes with it too)."""
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _sentence(rng: random.Random, n: int) -> str:
    return words(rng, n).capitalize() + "."


def write_release(folder: Path, per_task: int, seed: int = 7, profile_items: int = PROFILE_ITEMS) -> None:
    """LaMP-2 (movie tags) and LaMP-4 (news headlines) dev splits in the official layout, `per_task` questions
    each, every user with `profile_items` profile items."""
    rng = random.Random(seed)
    tags = ", ".join(TAGS)
    for task, n in (("LaMP_2", 2), ("LaMP_4", 4)):
        questions, golds = [], []
        for q in range(per_task):
            qid = f"{n}{q:07d}"
            if n == 2:
                text = (f"Which tag does this movie relate to among the following tags? Just answer with the tag "
                        f"name without further explanation. tags: [{tags}] description: {_sentence(rng, 12)}")
                profile = [{"id": f"{qid}{i:02d}", "description": _sentence(rng, 10), "tag": rng.choice(TAGS)}
                           for i in range(profile_items)]
                gold = rng.choice(TAGS)
            else:
                text = f"Generate a headline for the following article: {_sentence(rng, 20)}"
                profile = [{"id": f"{qid}{i:02d}", "text": _sentence(rng, 18), "title": _sentence(rng, 6)}
                           for i in range(profile_items)]
                gold = _sentence(rng, 6)
            questions.append({"id": qid, "input": text, "profile": profile})
            golds.append({"id": qid, "output": gold})
        split = folder / task / "dev"
        split.mkdir(parents=True, exist_ok=True)
        (split / "dev_questions.json").write_text(json.dumps(questions))
        (split / "dev_outputs.json").write_text(json.dumps({"task": task, "golds": golds}))


AGENTS = ("lamp-oracle", "lamp-no-profile", "lamp-rag")


def write_configs(work: Path, per_task: int, base_url: str, concurrency: int, shard_size: int | None,
                  in_process: bool | None = None, agents: tuple[str, ...] = AGENTS, retrievers: tuple[str, ...] = ("bm25",),
                  controls: tuple[str, ...] = ("swapped-history",)) -> Path:
    cfg = work / "configs"
    for sub in ("models", "deployments", "experiments"):
        (cfg / sub).mkdir(parents=True, exist_ok=True)
    (cfg / "models" / "stand-in.yaml").write_text(yaml.safe_dump(
        {"name": "stand-in", "format": "api", "source": "stand-in", "deployment": "stand-in",
         "sampling": {"temperature": 0.0, "max_tokens": 64}}))
    (cfg / "deployments" / "stand-in.yaml").write_text(yaml.safe_dump(
        {"name": "stand-in", "kind": "openai", "base_url": base_url, "max_concurrency": concurrency,
         "retries": 0}))
    experiment: dict[str, Any] = {
        "name": "scale", "seed": 42, "repeats": 1, "output_root": "runs", "backbones": ["stand-in"],
        "retrievers": list(retrievers), "judges": [], "controls": list(controls),
        "benchmarks": [{"name": "lamp", "source": str(work / "release"), "sample": per_task,
                        "params": {"split": "dev", "setting": "user", "tasks": ["LaMP-2", "LaMP-4"]},
                        "agents": list(agents)}],
        "mlflow": {"experiment": "perseval-scale", "tracking_uri": "sqlite:///mlruns/mlflow.db",
                   "artifact_root": "mlruns/artifacts"}}
    if shard_size:
        experiment["shard_size"] = shard_size
    if in_process is not None:
        experiment["dask"] = {"in_process": in_process}
    path = cfg / "experiments" / "scale.yaml"
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    return path


# ---- the stand-in and the plain client ---------------------------------------------------------------

async def plain_client(url: str, n: int, concurrency: int) -> float:
    """Requests/s of `n` distinct chat requests through one httpx.AsyncClient, `concurrency` in flight."""
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        async def one(i: int) -> None:
            async with sem:
                body = {"model": "stand-in", "max_tokens": 64, "temperature": 0.0,
                        "messages": [{"role": "user", "content": f"plain request {i}: {_sentence(random.Random(i), 30)}"}]}
                (await client.post("/v1/chat/completions", json=body)).raise_for_status()

        t0 = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(n)))
        return n / (time.monotonic() - t0)


# ---- one size -----------------------------------------------------------------------------------------

class PeakRss(threading.Thread):
    """The largest summed RSS of a process and its descendants, sampled every 0.5 s."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()
        self.samples: list[tuple[float, int, int]] = []  # (time, summed RSS, largest single process's RSS)

    def run(self) -> None:
        while not self.done.wait(0.5):
            try:
                root = psutil.Process(self.pid)
                rss = [_rss(p) for p in [root, *root.children(recursive=True)]]
            except psutil.NoSuchProcess:
                return
            self.samples.append((time.time(), sum(rss), max(rss)))
            self.peak = max(self.peak, sum(rss))

    def by_stage(self, windows: dict[str, list[float]]) -> dict[str, dict[str, int]]:
        """The peak summed and largest single-process RSS (MB) sampled within each stage's window."""
        out = {}
        for stage, (a, b) in windows.items():
            inside = [(t, s, m) for t, s, m in self.samples if a <= t <= b]
            if inside:
                out[stage] = {"sum_mb": round(max(s for _, s, _ in inside) / 2 ** 20),
                              "process_mb": round(max(m for _, _, m in inside) / 2 ** 20)}
        return out


def _rss(p: psutil.Process) -> int:
    try:
        return p.memory_info().rss
    except psutil.Error:
        return 0


def perseval_run(config: Path, work: Path, tag: str) -> dict[str, Any]:
    summary = work / f"summary-{tag}.json"
    cmd = [sys.executable, "-m", "perseval_flows.cli", "run", str(config), "--summary-json", str(summary), "--quiet"]
    t0 = time.monotonic()
    with open(work / f"out-{tag}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=child_env(work, None), stdout=log, stderr=subprocess.STDOUT)
        rss = PeakRss(proc.pid)
        rss.start()
        rc = proc.wait()
        rss.done.set()
    wall = time.monotonic() - t0
    if rc != 0:
        tail = (work / f"out-{tag}.log").read_text()[-4000:]
        raise SystemExit(f"perseval run ({tag}) exited {rc}:\n{tail}")
    got = json.loads(summary.read_text())
    return {"wall_s": round(wall, 1), "rc": rc, "peak_rss_mb": round(rss.peak / 2 ** 20),
            "rss_by_stage": rss.by_stage(got.get("stage_windows", {})),
            "timings": got["timings"], "llm_requests": got["llm_requests"]}


def prefect_database(folder: Path) -> tuple[Path, float]:
    """A Prefect database with every migration applied, made once (`prefect server database upgrade`), and the
    seconds it took: each run's Prefect home starts from a copy, as on a machine that has run Prefect before
    (a first-ever run on a machine creates it while its local server starts: 26 s here under load, 11 s CPU)."""
    home = folder / "prefect-template"
    home.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], check=True,
                   env={**os.environ, "PREFECT_HOME": str(home)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return home / "prefect.db", time.monotonic() - t0


def seed_prefect_home(work: Path, database: Path | None) -> None:
    """The run's own Prefect home (bench_pipeline.child_env), holding a copy of the migrated database."""
    if database is not None:
        (work / "prefect-home").mkdir(parents=True, exist_ok=True)
        shutil.copy(database, work / "prefect-home" / database.name)


def one_size(instances: int, url: str, concurrency: int, shard_size: int | None, plain_rate: float,
             keep: Path | None, in_process: bool | None = None, database: Path | None = None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"scale-{instances}-", dir=keep))
    seed_prefect_home(work, database)
    per_task = instances // 2
    write_release(work / "release", per_task)
    config = write_configs(work, per_task, f"{url}/v1", concurrency, shard_size, in_process)
    cold = perseval_run(config, work, "cold")
    again = perseval_run(config, work, "cached")
    t = cold["timings"]
    stage_sum = sum(v for v in t.values() if isinstance(v, (int, float)))
    run_rate = cold["llm_requests"] / t["run"] if t.get("run") else float("nan")
    out = {"instances": instances, "requests": cold["llm_requests"], "cold": cold, "cached": again,
           "run_req_per_s": round(run_rate, 1), "ratio_to_plain": round(run_rate / plain_rate, 2),
           "outside_stages_s": round(cold["wall_s"] - stage_sum, 1),
           "mb_per_1k_instances": round(cold["peak_rss_mb"] / instances * 1000, 1),
           "per_1k_instances_s": {k: round(v / instances * 1000, 3) for k, v in t.items()
                                  if isinstance(v, (int, float))}}
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        out["workdir"] = str(work)
    return out


def report(rows: list[dict[str, Any]], plain_rate: float) -> None:
    print(f"plain httpx client: {plain_rate:.0f} req/s")
    for r in rows:
        c = r["cold"]
        print(f"\n{r['instances']} instances, {r['requests']:.0f} requests: wall {c['wall_s']} s, exit {c['rc']}, "
              f"peak RSS {c['peak_rss_mb']} MB ({r['mb_per_1k_instances']} MB per 1k instances)")
        print(f"  run stage {r['run_req_per_s']} req/s = {r['ratio_to_plain']}x the plain client; "
              f"outside every stage {r['outside_stages_s']} s")
        print("  stage s:      " + ", ".join(f"{k} {v}" for k, v in c["timings"].items()))
        print("  s per 1k:     " + ", ".join(f"{k} {v}" for k, v in r["per_1k_instances_s"].items()))
        print("  peak RSS MB per stage (all processes / largest one): " + ", ".join(
            f"{k} {v['sum_mb']}/{v['process_mb']}" for k, v in c["rss_by_stage"].items()))
        print(f"  cached re-run: {r['cached']['wall_s']} s, {r['cached']['llm_requests']:.0f} requests")
    if len(rows) > 1:
        a, b = rows[0]["per_1k_instances_s"], rows[-1]["per_1k_instances_s"]
        print(f"\nper-instance cost, {rows[-1]['instances']} vs {rows[0]['instances']}: " + ", ".join(
            f"{k} {b[k] / a[k]:.2f}x" for k in a if k in b and a[k] > 0.05))


def main() -> None:
    ap = argparse.ArgumentParser(description="the pipeline against an instant stand-in server")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000], help="instances per run (half per task)")
    ap.add_argument("--concurrency", type=int, default=64, help="the deployment's max_concurrency")
    ap.add_argument("--shard-size", type=int, default=None, help="an explicit shard_size (default: the automatic one)")
    ap.add_argument("--in-process", choices=("default", "true", "false"), default="default",
                    help="the experiment's dask.in_process (default: left out)")
    ap.add_argument("--fresh-prefect", action="store_true",
                    help="each run creates its Prefect database, as a machine's first run does")
    ap.add_argument("--plain-requests", type=int, default=3000)
    ap.add_argument("--latency-ms", type=float, default=0.0, help="the stand-in's latency per completion")
    ap.add_argument("--keep", type=Path, default=None, help="keep each run's working folder under this folder")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="scale-prefect-", dir=args.keep))
    database, made_s = prefect_database(scratch) if not args.fresh_prefect else (None, 0.0)
    with standin_process(args.latency_ms) as url:
        plain = asyncio.run(plain_client(url, args.plain_requests, args.concurrency))
        rows = []
        for n in args.sizes:
            in_process = None if args.in_process == "default" else args.in_process == "true"
            rows.append(one_size(n, url, args.concurrency, args.shard_size, plain, args.keep, in_process, database))
            print(json.dumps(rows[-1]), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    if database is not None:
        print(f"(the Prefect database, made once and copied into each run's Prefect home: {made_s:.1f} s)")
    report(rows, plain)
    if args.json:
        args.json.write_text(json.dumps({"machine": f"{os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d"),
                                         "plain_req_per_s": round(plain, 1), "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
