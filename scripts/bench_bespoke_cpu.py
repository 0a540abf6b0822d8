"""Wall time per stage and model requests per Bespoke setting of one `perseval run`.

    .venv/bin/perseval run perseval/benchmarks/bespoke/configs/experiments/bespoke_cpu.yaml --summary-json runs/bespoke-cpu.json
    .venv/bin/python scripts/bench_bespoke_cpu.py runs/bespoke-cpu.json [--output-root runs]

Stage seconds and requests by role come from the run summary; requests per setting (sent and answered from
the request cache, sessions judged and kept by LLM history selection) from the `requests_per_setting`
table of the Bespoke analysis, which sums the responders' traces.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("summary", type=Path, help="the JSON written by perseval run --summary-json")
    parser.add_argument("--output-root", type=Path, default=Path("runs"))
    args = parser.parse_args()
    summary = json.loads(args.summary.read_text())
    print("stage seconds:", json.dumps(summary["timings"]))
    print("requests sent, by role:", json.dumps(summary["requests"]))
    for folder in sorted((args.output_root / "analysis").glob("*")):
        table = folder / "requests_per_setting.csv"
        if table.is_file():
            print(f"\nrequests per setting ({folder.name}):")
            print(pd.read_csv(table, index_col=0).to_markdown(index=False))


if __name__ == "__main__":
    main()
