"""Wall time and peak memory of APeB's construction at the paper's size (5,648 cases).

    .venv/bin/python scripts/bench_apeb_mining.py                        # generate logs and mine them in memory
    .venv/bin/python scripts/bench_apeb_mining.py --write /tmp/apeb-logs # generate, write Parquet, exit
    .venv/bin/python scripts/bench_apeb_mining.py --source /tmp/apeb-logs  # read + validate + mine those files

Each phase's wall time is printed; peak memory is the process's peak resident set size (getrusage
ru_maxrss), read after each phase, so run one mode per process. Every generated user has one
non-trivial session, so `--cases` users give that many cases.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perseval.benchmarks.apeb.benchmark import APeB  # noqa: E402
from perseval.benchmarks.apeb.documents import event_documents  # noqa: E402
from perseval.benchmarks.apeb.logfiles import load_logs, write_logs  # noqa: E402
from perseval.benchmarks.apeb.sessions import mine_sessions  # noqa: E402
from perseval.benchmarks.apeb.synth_logs import generate_logs  # noqa: E402

PAPER_CASES = 5648


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


class Phases:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, float]] = {}

    def run(self, name: str, fn):
        t0 = time.perf_counter()
        value = fn()
        self.rows[name] = {"wall_s": round(time.perf_counter() - t0, 2), "peak_rss_mib_after": round(peak_rss_mib())}
        return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=PAPER_CASES, help="generated users (= cases)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--write", type=Path, help="generate and write the logs here (Parquet), then exit")
    ap.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    ap.add_argument("--source", type=Path, help="read, validate and mine the logs in this folder")
    args = ap.parse_args()

    bench, phases = APeB(), Phases()
    base = peak_rss_mib()
    if args.source:
        logs = phases.run("read_and_validate", lambda: load_logs(args.source))
    else:
        logs = phases.run("generate", lambda: generate_logs(args.cases, args.seed, bench.params.logs))
    if args.write:
        phases.run("write", lambda: write_logs(logs, args.write, args.format))
        size = sum(p.stat().st_size for p in args.write.iterdir()) / 2**20
        print(json.dumps({"users": len(logs.events), "events": logs.n_events, "written_mib": round(size, 1),
                          "phases": phases.rows}, indent=2))
        return
    mined = phases.run("mine", lambda: mine_sessions(logs.events, bench.params.mining))

    def build():
        instances, documents = [], []
        for s in mined.sessions:
            instances += bench.instances(s, logs.catalog, args.seed)
            documents += event_documents(s.user_id, s.history, logs.catalog)
        return instances, documents

    instances, documents = phases.run("instances_and_documents", build)
    counts = {k: v for k, v in sorted(mined.counts.items())}
    print(json.dumps({
        "origin": "source" if args.source else "generated", "users": len(logs.events), "events": logs.n_events,
        "products": len(logs.catalog.products), "cases": len(mined.sessions), "instances": len(instances),
        "history_documents": len(documents), "mining_counts": counts, "phases": phases.rows,
        "rss_at_start_mib": round(base), "peak_rss_mib": round(peak_rss_mib()),
    }, indent=2))


if __name__ == "__main__":
    main()
