"""How much of a run is pipeline overhead: run by hand, not a test.

P1, per LLM stage: the stage's seconds in a fresh run (request capture on) vs the seconds its captured
requests take when replayed straight to a freshly started server of the same deployment, with a plain
httpx.AsyncClient at the deployment's max_concurrency. A ratio near 1 (target <= 1.15) means the stage
costs what its requests cost.
P2: the wall time of the fresh (cold) run vs an identical re-run (which should send no request), and the
re-run's fixed cost: imports, Prefect server start, preparation, flow start (task runner), MLflow logging.

    python scripts/bench_pipeline.py --config configs/experiments/quickstart.yaml --p1 --p2 --json bench.json

Each `perseval run` is a child process in a temporary working folder (its own output_root, MLflow SQLite
and, when no PREFECT_API_URL is set, PREFECT_HOME), so the figures include what a user waits for.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perseval.config import ResolvedExperiment, load_experiment  # noqa: E402
from perseval.llm.client import CAPTURE_ENV, CAPTURED_BODY  # noqa: E402
from perseval.llm.deployments import Deployment  # noqa: E402
from perseval.redact import secret_from_env  # noqa: E402

# the client's role -> the flow's stage timing that holds its requests
STAGE_OF_ROLE = {"agent": "run", "judge": "judge"}
FIXED = ("imports", "prefect_server", "prepare", "flow_start", "track")


def stage_of(role: str) -> str:
    return "construct" if role.startswith("construct.") else STAGE_OF_ROLE.get(role, role)


def child_env(work: Path, capture: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop(CAPTURE_ENV, None)
    if capture is not None:
        env[CAPTURE_ENV] = str(capture)
    if not env.get("PREFECT_API_URL"):
        env["PREFECT_HOME"] = str(work / "prefect-home")  # the run's own local server database
    return env


def perseval_run(config: Path, work: Path, tag: str, capture: Path | None = None) -> dict[str, Any]:
    """`perseval run` as a user starts it; its summary with the wall time it took."""
    summary = work / f"summary-{tag}.json"
    cmd = [sys.executable, "-m", "flows.cli", "run", str(config), "--output-root", str(work / "runs"),
           "--summary-json", str(summary), "--quiet"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=child_env(work, capture), capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 3):  # 3: finished with some failed cells
        sys.exit(f"perseval run ({tag}) failed with {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return {**json.loads(summary.read_text()), "wall_s": round(wall, 2)}


# ---- P1: replay ------------------------------------------------------------------------------------

def read_capture(path: Path) -> dict[str, list[dict[str, Any]]]:
    by_stage: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text().splitlines() if path.exists() else []:
        rec = json.loads(line)
        by_stage[stage_of(rec["stage"])].append(rec)
    return dict(by_stage)


async def replay(requests: list[dict[str, Any]], endpoints: dict[str, Any]) -> tuple[float, list[float]]:
    """Send `requests` as captured, at each deployment's max_concurrency; wall seconds and latencies."""
    sems = {name: asyncio.Semaphore(ep.max_concurrency) for name, ep in endpoints.items()}
    latencies: list[float] = []

    async def send(http: httpx.AsyncClient, rec: dict[str, Any]) -> None:
        ep = endpoints[rec["model"]]
        body = {"model": ep.served_model, **{k: rec[k] for k in CAPTURED_BODY if rec.get(k) is not None}}
        key = secret_from_env(ep.api_key_env) if ep.api_key_env else ""
        async with sems[rec["model"]]:
            t = time.monotonic()
            resp = await http.post(f"{ep.base_url}/chat/completions", json=body,
                                   headers={"Authorization": f"Bearer {key}"} if key else {})
            latencies.append(time.monotonic() - t)
            resp.raise_for_status()

    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=max(ep.timeout_s for ep in endpoints.values())) as http:
        await asyncio.gather(*(send(http, r) for r in requests))
    return time.monotonic() - t0, latencies


def replay_stage(exp: ResolvedExperiment, requests: list[dict[str, Any]], log_dir: Path) -> tuple[float, list[float]]:
    """A fresh server per model of the stage (perseval's own deployment code), the replay, the stop."""
    models = sorted({r["model"] for r in requests})
    deployments = [Deployment(exp.models[m], exp.deployments[m], log_dir) for m in models]
    try:
        endpoints = {d.model.name: d.start() for d in deployments}
        return asyncio.run(replay(requests, endpoints))
    finally:
        for d in deployments:
            d.stop()


def p1(exp: ResolvedExperiment, cold: dict[str, Any], capture: Path, work: Path) -> dict[str, Any]:
    out = {}
    for stage, requests in read_capture(capture).items():
        replay_s, lat = replay_stage(exp, requests, work / "replay-logs")
        pipeline_s = cold["timings"].get(stage, float("nan"))
        out[stage] = {"requests": len(requests), "pipeline_s": pipeline_s, "replay_s": round(replay_s, 2),
                      "ratio": round(pipeline_s / replay_s, 2) if replay_s else None,
                      "pipeline_latency_mean_s": round(sum(r["latency_s"] for r in requests) / len(requests), 3),
                      "replay_latency_mean_s": round(sum(lat) / len(lat), 3)}
    return out


# ---- P2: fixed cost --------------------------------------------------------------------------------

def import_seconds(work: Path) -> float:
    """What the run command's imports cost a fresh interpreter, less the interpreter's own start."""
    def timed(code: str) -> float:
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", code], cwd=work, env=child_env(work, None), check=True)
        return time.monotonic() - t0

    return round(timed("import flows.cli, flows.runtime, flows.evaluate") - timed("pass"), 2)


def child_seconds(work: Path, code: str, *args: str) -> float:
    """What `code` prints last (a duration it timed itself) when run in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=work, env=child_env(work, None), check=True,
                         capture_output=True, text=True)
    return round(float(out.stdout.strip().splitlines()[-1]), 2)


def prefect_server_seconds(work: Path) -> float | None:
    """Start-up of the local Prefect server a run starts when none is configured (None: one is configured)."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    return child_seconds(work, "import time; from flows.prefect_server import local_prefect_server\n"
                               "t = time.monotonic()\n"
                               "with local_prefect_server('prefect-logs'): print(time.monotonic() - t)")


def dask_cluster_seconds(config: Path, work: Path) -> float:
    """Start-up of the experiment's Dask cluster: a cold run pays it inside its first stage with work (the
    runner starts it on the first submitted task), a re-run with nothing to submit not at all."""
    return child_seconds(work, "import sys, time; from flows.runtime import task_runner\n"
                               "from perseval.config import load_experiment\n"
                               "runner = task_runner(load_experiment(sys.argv[1]).experiment.dask)\n"
                               "with runner:\n    t = time.monotonic(); runner.client; print(time.monotonic() - t)",
                         str(config))


def p2(config: Path, cold: dict[str, Any], rerun: dict[str, Any], work: Path) -> dict[str, Any]:
    fixed = {"imports": import_seconds(work), "prefect_server": prefect_server_seconds(work),
             **{k: rerun["timings"].get(k) for k in FIXED[2:]}}
    stages = {k: v for k, v in rerun["timings"].items() if k not in FIXED}
    known = sum(v for v in [*fixed.values(), *stages.values()] if v)
    return {"cold_wall_s": cold["wall_s"], "rerun_wall_s": rerun["wall_s"],
            "ratio": round(rerun["wall_s"] / cold["wall_s"], 3), "rerun_requests": rerun["llm_requests"],
            "cold_requests": cold["llm_requests"], "rerun_fixed_s": fixed, "rerun_stages_s": stages,
            "rerun_other_s": round(rerun["wall_s"] - known, 2), "cold_timings": cold["timings"],
            "cold_dask_cluster_s": dask_cluster_seconds(config, work)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--p1", action="store_true", help="stage seconds vs a straight replay of their requests")
    ap.add_argument("--p2", action="store_true", help="cold vs re-run wall time and the re-run's fixed cost")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--workdir", type=Path, help="an empty folder to keep the runs in (default: a temporary one)")
    args = ap.parse_args()
    if not (args.p1 or args.p2):
        ap.error("ask for --p1, --p2 or both")
    config = args.config.resolve()
    exp = load_experiment(config)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = (args.workdir or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if any(work.iterdir()):  # an earlier run's outputs, cache or capture would make the cold run warm
            sys.exit(f"--workdir {work} is not empty")
        capture = work / "requests.jsonl"
        cold = perseval_run(config, work, "cold", capture)
        figures: dict[str, Any] = {"config": str(args.config), "cpu_count": os.cpu_count()}
        if args.p2:  # the re-run first: the replay's servers would only add load to the box later
            figures["p2"] = p2(config, cold, perseval_run(config, work, "rerun"), work)
        if args.p1:
            figures["p1"] = p1(exp, cold, capture, work)
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


def report(figures: dict[str, Any]) -> None:
    for stage, f in figures.get("p1", {}).items():
        print(f"P1 {stage:<10} requests {f['requests']:>4}  pipeline {f['pipeline_s']:>8.2f} s  replay "
              f"{f['replay_s']:>8.2f} s  ratio {f['ratio']}  (mean latency {f['pipeline_latency_mean_s']} s in "
              f"the pipeline, {f['replay_latency_mean_s']} s replayed)")
    if "p2" in figures:
        f = figures["p2"]
        print(f"P2 cold {f['cold_wall_s']} s ({f['cold_requests']} requests), re-run {f['rerun_wall_s']} s "
              f"({f['rerun_requests']} requests), ratio {f['ratio']}")
        print(f"P2 re-run fixed cost: {f['rerun_fixed_s']}, stages {f['rerun_stages_s']}, "
              f"other {f['rerun_other_s']} s")
        print(f"P2 cold run: stage seconds {f['cold_timings']}; its Dask cluster start ({f['cold_dask_cluster_s']} s, "
              "timed apart) is inside its first stage with work")


if __name__ == "__main__":
    main()
