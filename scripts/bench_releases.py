"""Releases at full size against the stand-in server: run by hand, not a test.

Each release runs end to end as a researcher would run it, in a working folder of its own (its output root,
MLflow SQLite store and Prefect home), against the stand-in OpenAI-compatible server (perseval.llm.standin,
instant) as every backbone and LLM judge:

- `prefeval`: PrefEval's official files (the `benchmark_dataset/` folder of github.com/amazon-science/PrefEval,
  given with --prefeval; nothing of it is copied into the repository), every preference of one form (every
  topic), both tasks, one inter-turn setting;
- `iba`: IBA-Bench constructed at its full size, 6,962 instances (Table 2's distribution), BM25 retrieval;
- `lamp`: LaMP's public tasks in the official file layout at the dev split's sizes (--lamp-sizes), generated
  here (the release cannot be downloaded on this machine), with 40 profile items per question unless given.

Per release it times `perseval validate`, the cold `perseval run`, its cached re-run (requests sent: 0 expected),
`perseval compare` of the two runs, `perseval samples` of one cell, and the MLflow UI (`perseval ui`): seconds
to its first answer and to the experiment's runs as the UI's experiment page asks for them.

    python scripts/bench_releases.py --prefeval /path/to/PrefEval/benchmark_dataset --json releases.json
    python scripts/bench_releases.py --only lamp --lamp-sizes LaMP-4=1925:204 LaMP-7=1500:18
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_pipeline import child_env  # noqa: E402  (scripts/, this script's folder)
from bench_scale import perseval_run, prefect_database, seed_prefect_home, words  # noqa: E402
from perseval.llm.deployments import free_port  # noqa: E402
from perseval.llm.standin import standin_process  # noqa: E402

# LaMP's dev split per public task: questions and profile items per question. The sizes are the user-based dev
# splits' (LaMP-4's 1,925 and LaMP-7's 1,500 as their Hugging Face cards list them; the others as the LaMP
# paper's data statistics give them); a profile of 40 items stands for each (the paper's averages run from
# about 18 to 205 items): pass --lamp-sizes TASK=QUESTIONS:ITEMS to change either.
LAMP_DEV = {"LaMP-1": (2500, 40), "LaMP-2": (696, 40), "LaMP-3": (2500, 40), "LaMP-4": (1925, 40),
            "LaMP-5": (1500, 40), "LaMP-7": (1500, 40)}
EVERY = 1_000_000  # an entry's sample above a release's size keeps all of it
TAGS = ("sci-fi", "comedy", "action", "romance", "classic", "fantasy", "dystopia", "true story")


def _lamp_row(task: str, qid: str, rng: random.Random, items: int) -> tuple[dict[str, Any], str]:
    """One question of `task` in the official layout, with `items` profile items, and its gold output."""
    n = task[len("LaMP-"):]
    item: Callable[[int], dict[str, Any]]
    if n == "1":
        a, b = words(rng, 6), words(rng, 6)
        text = (f'For an author who has written the paper with the title "{words(rng, 6)}", which reference is '
                f'related? Just answer with [1] or [2] without explanation. [1]: "{a}" [2]: "{b}"')
        item, gold = (lambda k: {"title": words(rng, 6), "abstract": words(rng, 30)}), rng.choice(["[1]", "[2]"])
    elif n == "2":
        text = (f"Which tag does this movie relate to among the following tags? Just answer with the tag name "
                f"without further explanation. tags: [{', '.join(TAGS)}] description: {words(rng, 20)}")
        item, gold = (lambda k: {"description": words(rng, 15), "tag": rng.choice(TAGS)}), rng.choice(TAGS)
    elif n == "3":
        text = ("What is the score of the following review on a scale of 1 to 5? just answer with 1, 2, 3, 4, or 5 "
                f"without further explanation. review: {words(rng, 40)}")
        item, gold = (lambda k: {"text": words(rng, 40), "score": str(rng.randint(1, 5))}), str(rng.randint(1, 5))
    elif n == "4":
        text = f"Generate a headline for the following article: {words(rng, 60)}"
        item, gold = (lambda k: {"text": words(rng, 60), "title": words(rng, 8)}), words(rng, 8)
    elif n == "5":
        text = f"Generate a title for the following abstract of a paper: {words(rng, 50)}"
        item, gold = (lambda k: {"title": words(rng, 8), "abstract": words(rng, 50)}), words(rng, 8)
    else:
        text = f"Paraphrase the following tweet without any explanation before or after it: {words(rng, 15)}"
        item, gold = (lambda k: {"text": words(rng, 15)}), words(rng, 15)
    profile = [{"id": f"{qid}{k:03d}", **item(k)} for k in range(items)]
    return {"id": qid, "input": text, "profile": profile}, gold


def write_lamp(folder: Path, sizes: dict[str, tuple[int, int]], seed: int = 7) -> None:
    """Every task's dev split in the official layout (perseval/benchmarks/lamp/layout.py)."""
    rng = random.Random(seed)
    for task, (questions, items) in sizes.items():
        rows, golds = [], []
        for q in range(questions):
            row, gold = _lamp_row(task, f"{task[5:]}{q:06d}", rng, items)
            rows.append(row)
            golds.append({"id": row["id"], "output": gold})
        split = folder / task.replace("-", "_") / "dev"
        split.mkdir(parents=True, exist_ok=True)
        (split / "dev_questions.json").write_text(json.dumps(rows))
        (split / "dev_outputs.json").write_text(json.dumps({"task": task.replace("-", "_"), "golds": golds}))


def releases(args: argparse.Namespace, work: Path) -> dict[str, dict[str, Any]]:
    """Per release: its benchmark entry, agents, judges and retrievers (what the experiment file names)."""
    out: dict[str, dict[str, Any]] = {}
    if "prefeval" in args.only:
        if args.prefeval is None:
            raise SystemExit("--prefeval: the benchmark_dataset/ folder of a PrefEval checkout is needed")
        out["prefeval"] = {"entry": {"name": "prefeval", "source": str(args.prefeval.resolve()), "sample": EVERY,
                                     "params": {"forms": [args.prefeval_form], "tasks": ["generation", "classification"],
                                                "inter_turns": [10]},
                                     "agents": ["prefeval-oracle", "prefeval-no-history", "prefeval-zero-shot"]},
                           "judges": ["stand-in-judge"], "retrievers": []}
    if "iba" in args.only:
        out["iba"] = {"entry": {"name": "iba", "sample": 6962, "params": {"distribution": "table2"},
                                "agents": ["iba-oracle", "iba-no-history", "iba-rag"]},
                      "judges": ["stand-in-judge"], "retrievers": ["bm25"]}
    if "lamp" in args.only:
        write_lamp(work / "lamp-release", args.lamp_sizes)
        out["lamp"] = {"entry": {"name": "lamp", "source": str(work / "lamp-release"), "sample": EVERY,
                                 "params": {"split": "dev", "tasks": list(args.lamp_sizes)},
                                 "agents": ["lamp-oracle", "lamp-no-profile", "lamp-rag"]},
                       "judges": [], "retrievers": ["bm25"]}
    return out


def write_experiment(work: Path, name: str, spec: dict[str, Any], base_url: str, concurrency: int) -> Path:
    cfg = work / "configs"
    for sub in ("models", "deployments", "experiments", "judges"):
        (cfg / sub).mkdir(parents=True, exist_ok=True)
    (cfg / "models" / "stand-in.yaml").write_text(yaml.safe_dump(
        {"name": "stand-in", "format": "api", "source": "stand-in", "deployment": "stand-in",
         "sampling": {"temperature": 0.0, "max_tokens": 64}}))
    (cfg / "deployments" / "stand-in.yaml").write_text(yaml.safe_dump(
        {"name": "stand-in", "kind": "openai", "base_url": base_url, "max_concurrency": concurrency, "retries": 0}))
    judge = yaml.safe_load((REPO / "configs" / "judges" / "smollm2-judge.yaml").read_text())
    (cfg / "judges" / "stand-in-judge.yaml").write_text(yaml.safe_dump(
        {**judge, "name": "stand-in-judge", "model": "stand-in"}))
    experiment = {"name": f"release-{name}", "seed": 42, "repeats": 1, "output_root": "runs",
                  "backbones": ["stand-in"], "retrievers": spec["retrievers"], "judges": spec["judges"],
                  "controls": [], "benchmarks": [spec["entry"]],
                  "mlflow": {"experiment": f"release-{name}", "tracking_uri": "sqlite:///mlruns/mlflow.db",
                             "artifact_root": "mlruns/artifacts"}}
    path = cfg / "experiments" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    return path


def command(work: Path, *args: str) -> dict[str, Any]:
    """A perseval command in `work` (its seconds, exit code and last lines)."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perseval_flows.cli", *args], cwd=work, env=child_env(work, None),
                          capture_output=True, text=True)
    return {"seconds": round(time.monotonic() - t0, 1), "rc": done.returncode,
            "tail": (done.stdout + done.stderr)[-600:]}


def ui_seconds(work: Path, experiment: str) -> dict[str, Any]:
    """`perseval ui` on the run's store: seconds to its first answer, then to the experiment's runs as its
    experiment page asks for them (one runs search of the experiment)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "perseval_flows.cli", "ui", "--port", str(port)], cwd=work,
                            env=child_env(work, None), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while True:
            try:
                httpx.get(f"{url}/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() - t0 > 300 or proc.poll() is not None:
                    return {"error": "the UI did not answer"}
                time.sleep(0.2)
        up = time.monotonic() - t0
        t1 = time.monotonic()
        found = httpx.get(f"{url}/ajax-api/2.0/mlflow/experiments/get-by-name",
                          params={"experiment_name": experiment}, timeout=60).json()
        runs = httpx.post(f"{url}/ajax-api/2.0/mlflow/runs/search", timeout=60, json={
            "experiment_ids": [found["experiment"]["experiment_id"]], "max_results": 100,
            "order_by": ["attributes.start_time DESC"]}).json()
        return {"start_s": round(up, 1), "experiment_page_s": round(time.monotonic() - t1, 2),
                "runs": len(runs.get("runs", []))}
    finally:
        subprocess.run(["kill", "--", f"-{proc.pid}"], check=False)
        proc.wait(30)


def one_release(name: str, spec: dict[str, Any], url: str, concurrency: int, keep: Path | None,
                database: Path) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"release-{name}-", dir=keep))
    seed_prefect_home(work, database)
    if name == "lamp":  # written beside the releases list: move it into this run's folder
        shutil.move(spec["entry"]["source"], work / "lamp-release")
        spec["entry"]["source"] = str(work / "lamp-release")
    config = write_experiment(work, name, spec, f"{url}/v1", concurrency)
    out: dict[str, Any] = {"validate": command(work, "validate", str(config))}
    out["cold"] = perseval_run(config, work, "cold")
    out["cached"] = perseval_run(config, work, "cached")
    summary = json.loads((work / "summary-cold.json").read_text())
    again = json.loads((work / "summary-cached.json").read_text())
    out["compare"] = command(work, "compare", summary["mlflow_run_id"], again["mlflow_run_id"])
    row = summary["headline"][-1]
    out["samples"] = command(work, "samples", summary["mlflow_run_id"], row["cell"], "--limit", "20")
    out["ui"] = ui_seconds(work, f"release-{name}")
    out["instances"] = max(row["instances"] for row in summary["headline"])
    out["requests"] = {"cold": summary["llm_requests"], "cached": again["llm_requests"]}
    out["workdir"] = str(work)
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=["prefeval", "iba", "lamp"], choices=["prefeval", "iba", "lamp"])
    ap.add_argument("--prefeval", type=Path, default=None, help="PrefEval's benchmark_dataset/ folder")
    ap.add_argument("--prefeval-form", default="explicit", choices=["explicit", "implicit-choice", "implicit-persona"])
    ap.add_argument("--lamp-sizes", nargs="+", default=None, metavar="TASK=QUESTIONS:ITEMS",
                    help="LaMP tasks with their questions and profile items (default: every public task's dev size)")
    ap.add_argument("--concurrency", type=int, default=64, help="the stand-in deployment's max_concurrency")
    ap.add_argument("--keep", type=Path, default=None, help="keep each release's working folder under this folder")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    args.lamp_sizes = dict(LAMP_DEV) if args.lamp_sizes is None else {
        t: tuple(int(x) for x in v.split(":")) for t, v in (s.split("=") for s in args.lamp_sizes)}
    staging = Path(tempfile.mkdtemp(prefix="releases-", dir=args.keep))
    database, _ = prefect_database(staging)
    rows = {}
    with standin_process() as url:
        for name, spec in releases(args, staging).items():
            rows[name] = one_release(name, spec, url, args.concurrency, args.keep, database)
            print(json.dumps({name: rows[name]}), flush=True)
    shutil.rmtree(staging, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "releases": rows}, indent=2))


if __name__ == "__main__":
    main()
