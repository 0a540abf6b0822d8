"""How much of a run is pipeline overhead: run by hand, not a test.

P1, per LLM stage: the stage's seconds in a fresh run (request capture on) vs the seconds its captured
requests take when replayed straight to a freshly started server of the same deployment, with a plain
httpx.AsyncClient at the deployment's max_concurrency. A ratio near 1 (target <= 1.15) means the stage
costs what its requests cost.
P2: the wall time of the fresh (cold) run vs an identical re-run (which should send no request), and the
re-run's fixed cost: imports, Prefect server start, preparation, flow start (task runner), MLflow logging.
P3, index build: passages/s of the index stage (perseval.pipeline.stages.index: documents read, chunked, encoded per
owner, FAISS-indexed, saved) vs one bare encode of the very same passages with the same embedder in the same
process (target >= 0.9x), and what a run shard pays to open the index and load one user's FAISS index.
P4, scale: construct + index of IBA-Bench (Table 2 distribution, 100 noise turns per evidence turn) at
fractions of the full 6,962 instances, each size in its own process (peak RSS is ru_maxrss): wall time, peak
RSS, growth per instance and a linear extrapolation to full size. Only a fixed slice of the documents is
encoded (`--encode-docs`); the encode time of the rest is extrapolated from that slice's documents/s.
P3 and P4 use the experiment's first dense retriever and IBA-Bench data built for the measurement.

    python scripts/bench_pipeline.py --config configs/experiments/quickstart.yaml --p1 --p2 --json bench.json
    python scripts/bench_pipeline.py --config perseval/benchmarks/iba/configs/experiments/iba_cpu.yaml --p3 --p4 --json scale.json

Each `perseval run` is a child process in a temporary working folder (its own output_root, MLflow SQLite
and, when no PREFECT_API_URL is set, PREFECT_HOME), so the figures include what a user waits for.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))  # proc_cpu, beside this script, also when imported by a test

from perseval.benchmarks.iba.distribution import FULL_SIZE  # noqa: E402
from perseval.experiment.components import make_retriever  # noqa: E402
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import BenchmarkEntry, ResolvedExperiment
from perseval.experiment.load import benchmark_params, load_experiment  # noqa: E402
from perseval.llm.client import CAPTURE_ENV  # noqa: E402
from perseval.llm.deployments import Deployment  # noqa: E402
from perseval.llm.replay import Replay, by_stage, read_capture, replay  # noqa: E402
from perseval.pipeline.plan import data_key, index_key  # noqa: E402
from perseval.pipeline.units import DataUnit, IndexUnit  # noqa: E402
from perseval.retrieval.base import CHUNKS_FILE, OWNERS_DIR, owner_slug  # noqa: E402
from perseval.retrieval.embedder import Embedder  # noqa: E402
from perseval.pipeline import stages  # noqa: E402

from proc_cpu import CpuSampler, format_table  # noqa: E402  (scripts/, this script's folder)

FIXED = ("imports", "prefect_server", "prepare", "flow_start", "track")


def child_env(work: Path, capture: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop(CAPTURE_ENV, None)
    if capture is not None:
        env[CAPTURE_ENV] = str(capture)
    if not env.get("PREFECT_API_URL"):
        env["PREFECT_HOME"] = str(work / "prefect-home")  # the run's own local server database
    return env


def perseval_run(config: Path, work: Path, tag: str, capture: Path | None = None,
                 env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    """`perseval run` as a user starts it; its summary with the wall time it took and the CPU its processes
    used per stage (`cpu`: proc_cpu.CpuSampler's table over the flow's stage windows)."""
    summary = work / f"summary-{tag}.json"
    cmd = [sys.executable, "-m", "perseval_flows.cli", "run", str(config), "--output-root", str(work / "runs"),
           "--summary-json", str(summary), "--quiet"]
    log = work / f"out-{tag}.log"
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=work, env={**child_env(work, capture), **(env_extra or {})}, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        sampler = CpuSampler(proc.pid).start()
        rc = proc.wait()
        sampler.stop()
    wall = time.monotonic() - t0
    if rc not in (0, 3):  # 3: finished with some failed cells
        sys.exit(f"perseval run ({tag}) failed with {rc}:\n{log.read_text()[-6000:]}")
    got = json.loads(summary.read_text())
    return {**got, "wall_s": round(wall, 2), "cpu": sampler.table(got.get("stage_windows", {}))}


# ---- P1: replay ------------------------------------------------------------------------------------

def replay_stage(exp: ResolvedExperiment, requests: list[dict[str, Any]], log_dir: Path) -> Replay:
    """A fresh server per model of the stage (perseval's own deployment code), the replay at the deployment's
    concurrency in the captured order, the stop."""
    [model] = sorted({r["model"] for r in requests})  # one model per stage in the experiments measured here
    deployment = Deployment(exp.models[model], exp.deployments[model], log_dir)
    try:
        endpoint = deployment.start()
        return asyncio.run(replay(requests, endpoint, endpoint.max_concurrency))
    finally:
        deployment.stop()


def p1(exp: ResolvedExperiment, cold: dict[str, Any], capture: Path, work: Path) -> dict[str, Any]:
    out = {}
    for stage, requests in by_stage(read_capture(capture)).items():
        done = replay_stage(exp, requests, work / "replay-logs")
        pipeline_s, lat = cold["timings"].get(stage, float("nan")), [a.latency_s for a in done.answers]
        out[stage] = {"requests": len(requests), "pipeline_s": pipeline_s, "replay_s": round(done.wall_s, 2),
                      "ratio": round(pipeline_s / done.wall_s, 2) if done.wall_s else None,
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

    return round(timed("import perseval_flows.cli, perseval_flows.runtime, perseval_flows.evaluate") - timed("pass"), 2)


def child_seconds(work: Path, code: str, *args: str) -> float:
    """What `code` prints last (a duration it timed itself) when run in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=work, env=child_env(work, None), check=True,
                         capture_output=True, text=True)
    return round(float(out.stdout.strip().splitlines()[-1]), 2)


def prefect_server_seconds(work: Path) -> float | None:
    """Start-up of the local Prefect server a run starts when none is configured (None: one is configured)."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    return child_seconds(work, "import time; from perseval_flows.prefect_server import local_prefect_server\n"
                               "t = time.monotonic()\n"
                               "with local_prefect_server('prefect-logs'): print(time.monotonic() - t)")


def dask_cluster_seconds(config: Path, work: Path) -> float:
    """Start-up of the experiment's Dask cluster: a cold run pays it inside its first stage with work (the
    runner starts it on the first submitted task), a re-run with nothing to submit not at all."""
    return child_seconds(work, "import sys, time; from perseval_flows.runtime import task_runner\n"
                               "from perseval.experiment.load import load_experiment\n"
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

# ---- P3 / P4: index build and scale ----------------------------------------------------------------

def dense_retriever(exp: ResolvedExperiment) -> RetrieverConfig:
    for name in exp.experiment.retrievers:
        if exp.retrievers[name].kind == "dense":
            return exp.retrievers[name]
    sys.exit(f"{exp.path}: P3 and P4 need a dense retriever among the experiment's retrievers")


def iba_units(n: int, retriever: RetrieverConfig, seed: int) -> tuple[DataUnit, IndexUnit]:
    """IBA-Bench at `n` instances shaped as the paper's (Table 2 distributions, 100 noise turns per evidence)."""
    entry = BenchmarkEntry(name="iba", sample=n, agents=["iba-rag"],
                           params={"distribution": "table2", "noise_per_evidence": 100})
    params = benchmark_params(entry, "bench", 0)
    data = DataUnit(data_key(entry, params, seed, {}), entry, seed, params)
    retriever_params = make_retriever(retriever).params
    return data, IndexUnit(index_key(data.key, retriever), data, retriever, retriever_params)


def bench_runtime(root: Path, shard_size: int) -> stages.Runtime:
    return stages.Runtime(str(root), "bench", str(root / "request-cache.sqlite"), shard_size)


def clocked(fn: Any, *args: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    out = fn(*args)
    return out, time.monotonic() - t0


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # Linux reports KiB


def p3(exp: ResolvedExperiment, work: Path, n_instances: int) -> dict[str, Any]:
    retriever = dense_retriever(exp)
    data, unit = iba_units(n_instances, retriever, exp.experiment.seed)
    rt = bench_runtime(work / "p3", exp.experiment.shard_size)
    stages.construct(data, rt)
    # load the model once first (the stage's retriever finds it in perseval's model cache): both sides
    # then time encoding with a loaded model, and the load is reported on its own
    embedder, load_s = clocked(Embedder, make_retriever(retriever).params.embedder)
    manifest, stage_s = clocked(stages.index, unit, rt)
    chunks = pq.read_table(Path(rt.store("index", unit.key).dir) / CHUNKS_FILE, columns=["owner", "text"])
    texts = chunks["text"].to_pylist()
    _, bare_s = clocked(embedder.encode_passages, texts)
    # the same encode user by user, as the stage calls it: what its smaller batches cost, apart from the rest
    by_owner: dict[str, list[str]] = defaultdict(list)
    for owner, text in zip(chunks["owner"].to_pylist(), texts):
        by_owner[owner].append(text)
    _, per_user_s = clocked(lambda: [embedder.encode_passages(t) for t in by_owner.values()])
    return {"retriever": retriever.name, "instances": n_instances, "documents": manifest["documents"],
            "passages": len(texts), "users": len(by_owner), "embedder_load_s": round(load_s, 3),
            "stage_s": round(stage_s, 3), "bare_encode_s": round(bare_s, 3),
            "bare_per_user_encode_s": round(per_user_s, 3), "stage_passages_per_s": round(len(texts) / stage_s, 1),
            "bare_passages_per_s": round(len(texts) / bare_s, 1), "ratio": round(bare_s / stage_s, 3),
            "per_user_ratio": round(bare_s / per_user_s, 3), "shard_index_load": shard_index_load(rt, data, unit)}


def shard_index_load(rt: stages.Runtime, data: DataUnit, unit: IndexUnit) -> dict[str, Any]:
    """What the first run shard pays before it searches: opening the index (the chunk table of its users),
    then loading one user's FAISS index (its first search does that), then a search (query encode + search)."""
    owners = {i.user_id for i in stages.shard_of(stages.load_instances(rt.root, data.key), 0, rt.shard_size)}
    index_dir, retriever = Path(rt.store("index", unit.key).dir), make_retriever(unit.retriever, unit.params)
    searcher, open_s = clocked(retriever.open, index_dir, owners)
    owner = sorted(owners)[0]
    _, load_s = clocked(retriever.load_owner, index_dir / OWNERS_DIR / owner_slug(owner))
    searcher.search(owner, "what do I usually order for dinner?", 3)  # loads the index and the embedder
    _, search_s = clocked(searcher.search, owner, "which days do I keep free?", 3)
    return {"shard_users": len(owners), "open_ms": round(open_s * 1000, 2),
            "user_index_load_ms": round(load_s * 1000, 2), "search_ms": round(search_s * 1000, 2)}


def whole_users(docs: list[Any], n: int) -> list[Any]:
    """The documents of the first users (by id) until there are at least `n`: whole users, since the index
    stage encodes user by user."""
    by_owner: dict[str, list[Any]] = defaultdict(list)
    for d in docs:
        by_owner[d.owner].append(d)
    out: list[Any] = []
    for owner in sorted(by_owner):
        if len(out) >= n:
            break
        out += by_owner[owner]
    return out


def p4_size(exp: ResolvedExperiment, work: Path, n: int, encode_docs: int) -> dict[str, Any]:
    """One size, in this process: construct, read every document as the index stage does, index a slice of
    whole users (about `encode_docs` documents) with the stage's retriever code, extrapolate the rest, and
    build the model-free index over every document for the memory of a whole build."""
    retriever = dense_retriever(exp)
    indexer = make_retriever(retriever)
    _, load_s = clocked(lambda: indexer.embedder)  # the model load: a fixed cost, kept apart from rates and growth
    rss_before = peak_rss_mib()
    data, _ = iba_units(n, retriever, exp.experiment.seed)
    rt = bench_runtime(work, exp.experiment.shard_size)
    _, construct_s = clocked(stages.construct, data, rt)
    docs, read_s = clocked(stages.load_documents, rt.root, data.key)
    part = whole_users(docs, encode_docs)
    counts, part_s = clocked(indexer.build, part, work / "index-slice")
    index_s = read_s + load_s + part_s * len(docs) / len(part)
    dense_peak = peak_rss_mib()
    whole = whole_build(exp, docs, work / "index-whole")
    return {"instances": n, "documents": len(docs), "construct_s": round(construct_s, 2),
            "documents_read_s": round(read_s, 2), "embedder_load_s": round(load_s, 2), "encoded_documents": len(part),
            "encoded_chunks": counts["chunks"], "encode_slice_s": round(part_s, 2),
            "documents_per_s": round(len(part) / part_s, 1),
            "index_s": round(index_s, 1), "index_extrapolated": len(part) < len(docs),
            "wall_s": round(construct_s + index_s, 1), "rss_before_mib": rss_before,
            "peak_rss_dense_slice_mib": dense_peak, **whole, "peak_rss_mib": peak_rss_mib()}


def whole_build(exp: ResolvedExperiment, docs: list[Any], out: Path) -> dict[str, Any]:
    """The memory of building an index over every document (the chunk table of all users beside the documents),
    with the experiment's model-free retriever (bm25) if it has one: the same shared build, no encode time."""
    sparse = [exp.retrievers[n] for n in exp.experiment.retrievers if exp.retrievers[n].kind == "bm25"]
    if not sparse:
        return {}
    counts, build_s = clocked(make_retriever(sparse[0]).build, docs, out)
    return {"whole_build_retriever": sparse[0].name, "whole_build_chunks": counts["chunks"],
            "whole_build_s": round(build_s, 2)}


def p4(config: Path, work: Path, fractions: list[float], encode_docs: int, budget_s: float) -> dict[str, Any]:
    """Each size in a fresh process (its own peak RSS); a larger size only while the last took < budget_s."""
    sizes: list[dict[str, Any]] = []
    for f in fractions:
        if sizes and sizes[-1]["process_s"] >= budget_s:
            break
        n, folder = round(FULL_SIZE * f), work / f"p4-{f}"
        cmd = [sys.executable, __file__, "--config", str(config), "--p4-child", str(n), "--encode-docs",
               str(encode_docs), "--workdir", str(folder)]
        proc, process_s = clocked(lambda: subprocess.run(cmd, env=child_env(folder, None), capture_output=True,
                                                         text=True))
        if proc.returncode != 0:
            sys.exit(f"P4 at {n} instances failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
        sizes.append({"fraction": f, "process_s": round(process_s, 1), **figures})
    return {"sizes": sizes, "full_size": extrapolate(sizes)}


def linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def extrapolate(sizes: list[dict[str, Any]], full: int = FULL_SIZE) -> dict[str, Any]:
    """A linear extrapolation to `full` instances, not a measurement: a least-squares line through the
    measured sizes (through one size and an origin when only one was measured: 0 s, or the RSS with imports
    and the model loaded). The growth per instance between consecutive points shows whether growth is
    linear (equal values) or not."""
    rss0 = min(s["rss_before_mib"] for s in sizes)
    out: dict[str, Any] = {"instances": full, "extrapolated": True}
    for key, origin in (("wall_s", 0.0), ("construct_s", 0.0), ("index_s", 0.0), ("peak_rss_mib", rss0)):
        points = [(0, origin)] + [(s["instances"], s[key]) for s in sizes]
        slope, icpt = linear_fit(points if len(points) == 2 else points[1:])
        out[key] = round(icpt + slope * full, 1)
        out[f"{key}_per_instance"] = [round((y - py) / (x - px), 4) for (px, py), (x, y) in zip(points, points[1:])]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--p1", action="store_true", help="stage seconds vs a straight replay of their requests")
    ap.add_argument("--p2", action="store_true", help="cold vs re-run wall time and the re-run's fixed cost")
    ap.add_argument("--p3", action="store_true", help="index stage passages/s vs a bare encode; shard index load")
    ap.add_argument("--p4", action="store_true", help="construct + index time and peak RSS at fractions of full size")
    ap.add_argument("--p3-instances", type=int, default=20, help="P3: IBA-Bench instances to index (default 20)")
    ap.add_argument("--p4-fractions", default="0.25,0.5", help="P4: fractions of the full size (default 0.25,0.5)")
    ap.add_argument("--p4-budget-s", type=float, default=240.0,
                    help="P4: measure the next size only if the last one took less (default 240)")
    ap.add_argument("--encode-docs", type=int, default=5000,
                    help="P4: documents encoded per size (whole users); the rest is extrapolated (default 5000)")
    ap.add_argument("--p4-child", type=int, help=argparse.SUPPRESS)  # one P4 size, in this process
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--workdir", type=Path, help="an empty folder to keep the runs in (default: a temporary one)")
    args = ap.parse_args()
    config = args.config.resolve()
    exp = load_experiment(config)
    if args.p4_child:
        args.workdir.mkdir(parents=True, exist_ok=True)
        print(json.dumps(p4_size(exp, args.workdir.resolve(), args.p4_child, args.encode_docs)))
        return
    if not (args.p1 or args.p2 or args.p3 or args.p4):
        ap.error("ask for one or more of --p1, --p2, --p3, --p4")
    figures: dict[str, Any] = {"config": str(args.config), "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = (args.workdir or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if any(work.iterdir()):  # an earlier run's outputs, cache or capture would make the cold run warm
            sys.exit(f"--workdir {work} is not empty")
        if args.p1 or args.p2:
            llm_stages(args, config, exp, work, figures)
        if args.p4:  # before P3: a child's ru_maxrss starts at its parent's RSS, which P3's model would raise
            fractions = [float(f) for f in args.p4_fractions.split(",")]
            figures["p4"] = p4(config, work, fractions, args.encode_docs, args.p4_budget_s)
        if args.p3:
            figures["p3"] = p3(exp, work, args.p3_instances)
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


def llm_stages(args: argparse.Namespace, config: Path, exp: ResolvedExperiment, work: Path,
               figures: dict[str, Any]) -> None:
    """P1 and P2, which share one cold run of the experiment."""
    capture = work / "requests.jsonl"
    cold = perseval_run(config, work, "cold", capture)
    figures["cold_cpu"] = cold["cpu"]
    if args.p2:  # the re-run first: the replay's servers would only add load to the box later
        figures["p2"] = p2(config, cold, perseval_run(config, work, "rerun"), work)
    if args.p1:
        figures["p1"] = p1(exp, cold, capture, work)


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
    if "cold_cpu" in figures:
        print("\n".join(format_table(figures["cold_cpu"])))
    if "p3" in figures:
        f = figures["p3"]
        print(f"P3 index stage {f['stage_passages_per_s']} passages/s ({f['passages']} passages, {f['stage_s']} s) vs "
              f"bare encode {f['bare_passages_per_s']} passages/s ({f['bare_encode_s']} s): ratio {f['ratio']} "
              f"(embedder load {f['embedder_load_s']} s, apart); the bare encode user by user "
              f"{f['bare_per_user_encode_s']} s (ratio {f['per_user_ratio']})")
        print(f"P3 run shard: {f['shard_index_load']}")
    for f in figures.get("p4", {}).get("sizes", []):
        part = f" (extrapolated from {f['encoded_documents']} encoded)" if f["index_extrapolated"] else ""
        print(f"P4 {f['instances']} instances, {f['documents']} documents: construct {f['construct_s']} s, index "
              f"{f['index_s']} s{part}, peak RSS {f['peak_rss_mib']} MiB (process {f['process_s']} s)")
    if "p4" in figures:
        print(f"P4 full size, extrapolated linearly: {figures['p4']['full_size']}")


if __name__ == "__main__":
    main()
