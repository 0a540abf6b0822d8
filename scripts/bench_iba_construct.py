"""Wall time and peak memory of a full-size IBA-Bench construction in template mode.

    .venv/bin/python scripts/bench_iba_construct.py                  # in memory, as IbaBenchmark.build does
    .venv/bin/python scripts/bench_iba_construct.py --mode stream    # streamed to Parquet by the construct stage

Peak memory is the process's peak resident set size (getrusage ru_maxrss), so run one
mode per process. While the bundled taxonomy lacks some of Table 2's domains, a full-size
build has fewer than 6,962 instances; `--stand-in` fills each missing domain with copies
of existing scenarios so that the measurement is at the paper's scale.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perseval.benchmarks.iba.taxonomy import load_taxonomy  # noqa: E402
from perseval.benchmarks.iba.construct import ConstructParams, construct  # noqa: E402
from perseval.benchmarks.iba.distribution import FULL_SIZE, missing_domains  # noqa: E402
from perseval.benchmarks.iba.taxonomy import Taxonomy  # noqa: E402
from perseval.experiment.config import BenchmarkEntry  # noqa: E402
from perseval.pipeline.units import DataUnit  # noqa: E402
from perseval.experiment.components import make_benchmark  # noqa: E402
from perseval.pipeline.stages import Runtime, construct as construct_stage  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def with_stand_ins(tax: Taxonomy) -> Taxonomy:
    """Copies of the existing scenarios under each Table 2 domain the taxonomy lacks (measurement only)."""
    fields = {f.name for f in dataclasses.fields(tax.scenarios[0])}
    extra = []
    for domain in missing_domains(tax):
        for s in tax.scenarios:
            changes = {"domain": domain, "name": f"{s.name} [{domain}]"}
            if "instances" in fields:
                changes["instances"] = None  # spread the domain's count evenly
            extra.append(dataclasses.replace(s, **changes))
    return Taxonomy(tax.scenarios + tuple(extra), tax.source + " + stand-ins")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["memory", "stream"], default="memory")
    ap.add_argument("--noise", type=float, default=100.0, help="noise turns per evidence turn (default 100)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--stand-in", action="store_true", help="fill missing Table 2 domains with scenario copies")
    ap.add_argument("--out", default=None, help="stream mode: store root (default: a temporary folder)")
    args = ap.parse_args()

    tax = load_taxonomy()
    if args.stand_in:
        tax = with_stand_ins(tax)
    params = ConstructParams(noise_per_evidence=args.noise, full_size=True)
    base = peak_rss_mib()
    t0 = time.perf_counter()
    if args.mode == "memory":
        data = construct(tax, sample=FULL_SIZE, seed=args.seed, params=params)
        info, n_docs = data.info, len(data.documents)
    else:
        root = args.out or tempfile.mkdtemp(prefix="iba-bench-")
        import perseval.benchmarks.iba.benchmark as iba_benchmark

        iba_benchmark.load_taxonomy = lambda: tax  # the (possibly stand-in) taxonomy, for this measurement only
        entry = BenchmarkEntry(name="iba", sample=FULL_SIZE, agents=["-"],
                               params={"noise_per_evidence": args.noise, "full_size": True})
        unit = DataUnit("bench", entry, args.seed, make_benchmark("iba", entry.params).params)
        manifest = construct_stage(unit, Runtime(root, "bench", f"{root}/c.sqlite", 1))
        info, n_docs = manifest.info, manifest.n_documents
        size = sum(p.stat().st_size for p in Path(root).rglob("*.parquet")) / 2**20
        print(f"parquet written: {size:.0f} MiB under {root}")
    wall = time.perf_counter() - t0
    summary = {
        "mode": args.mode, "stand_in": args.stand_in, "noise_per_evidence": args.noise,
        "instances": info["n_instances"], "documents": n_docs, "evidence_turns": info["n_evidence"],
        "missing_domains": info.get("missing_domains"), "clamped_constraints": info.get("clamped_constraints"),
        "wall_s": round(wall, 1), "peak_rss_mib": round(peak_rss_mib()), "rss_before_build_mib": round(base),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
