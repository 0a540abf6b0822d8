"""Where the start of `perseval ui` goes, and how long until the MLflow UI answers.

    python scripts/ui_startup.py [--repeat N] [--parts import,store,mlflow,perseval]

Run from a folder holding mlruns/mlflow.db (a `perseval run` made it). Each part runs in a fresh Python, N times
(default 3); one line per part gives the median and the range in seconds, with the load average before it:
  import   `import mlflow.cli` (what `mlflow server`'s command line imports first) and `import
           mlflow.server.fastapi_app` (what every uvicorn worker of it imports again: the app `perseval ui` serves)
  store    `initialize_backend_stores` on this store after those imports (its schema check)
  mlflow   `mlflow server --workers 1` as `perseval ui` ran it before: launch -> first /health 200
  perseval `perseval ui`: launch -> its first answer (the page saying what it waits for), -> first /health 200,
           and the first experiments search after it (the UI's first data request)
The servers listen on 127.0.0.1:5099 and are stopped (their process group) after each try.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from perseval.experiment.config import MLflowSettings
from perseval.report.store_paths import resolve_tracking

PORT = 5099
URL = f"http://127.0.0.1:{PORT}"
# each measured inside a fresh Python, from before the statement to after it (not the interpreter's start or exit)
IMPORT = "import time; t = time.monotonic(); import {module}; print(time.monotonic() - t)"
STORE = """
import sys, time
from mlflow.server.handlers import initialize_backend_stores
t = time.monotonic()
initialize_backend_stores(sys.argv[1], sys.argv[1], sys.argv[2])
print(time.monotonic() - t)
"""


def seconds(code: str, *args: str) -> float:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def status(path: str) -> int | None:
    """The HTTP status of GET `path`, None when nothing answers."""
    try:
        return urllib.request.urlopen(URL + path, timeout=2).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def served(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Seconds from launching `command` to its first answer, to /health 200, and of the first search after it."""
    t0 = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    marks: dict[str, float] = {}
    try:
        while time.monotonic() - t0 < 300 and proc.poll() is None:
            code = status("/health")
            if code is not None:
                marks.setdefault("first answer", time.monotonic() - t0)
            if code == 200:
                marks["health 200"] = time.monotonic() - t0
                t = time.monotonic()
                ok = status("/api/2.0/mlflow/experiments/search?max_results=10")
                marks["first search"] = time.monotonic() - t if ok == 200 else float("nan")
                break
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    return marks


def line(name: str, values: list[float]) -> None:
    print(f"{name}: median {statistics.median(values):.1f} s (min {min(values):.1f}, max {max(values):.1f}, "
          f"n={len(values)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default="import,store,mlflow,perseval")
    args = parser.parse_args()
    parts = args.parts.split(",")
    uri, artifacts = resolve_tracking(MLflowSettings())
    if not Path(uri[len("sqlite:///"):]).is_file():
        sys.exit(f"no store at {uri}: run this where a `perseval run` made mlruns/mlflow.db")
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
          f"store {uri}", flush=True)
    if "import" in parts:
        for module in ("mlflow.cli", "mlflow.server.fastapi_app"):
            line(f"import {module}", [seconds(IMPORT.format(module=module)) for _ in range(args.repeat)])
    if "store" in parts:
        line("open the store (initialize_backend_stores)", [seconds(STORE, uri, artifacts) for _ in range(args.repeat)])
    runs = {"mlflow": [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--default-artifact-root",
                       artifacts, "--host", "127.0.0.1", "--port", str(PORT), "--workers", "1"],
            "perseval": [sys.executable, "-m", "perseval_flows.cli", "ui", "--port", str(PORT)]}
    names = [p for p in ("mlflow", "perseval") if p in parts]
    tries: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(args.repeat):  # interleaved, so a change of the machine's load falls on both alike
        for name in names:
            tries[name].append(served(runs[name], env))
    for name in names:
        for mark in ("first answer", "health 200", "first search"):
            values = [t[mark] for t in tries[name] if mark in t]
            if values and not (name == "mlflow" and mark == "first answer"):  # mlflow's first answer is its health
                line(f"{'mlflow server --workers 1' if name == 'mlflow' else 'perseval ui'}: {mark}", values)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
