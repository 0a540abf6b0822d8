"""Print the cross-benchmark summary of a finished run: one row per kind of agent (history, no history,
oracle), one column per benchmark, each cell the headline score with its 95% user-clustered interval and
users. (A run of two benchmarks or more logs the same table as its parent run's cross_benchmark.md.)

usage: python scripts/cross_benchmark_table.py configs/experiments/personalization_cpu.yaml summary.json
(summary.json: the file `perseval run CONFIG --summary-json summary.json` wrote)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perseval.report.cross_benchmark import agent_roles, cross_benchmark_table
from perseval.experiment.load import load_experiment


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    exp = load_experiment(Path(argv[0]))
    rows = json.loads(Path(argv[1]).read_text())["headline"]
    print(cross_benchmark_table(rows, agent_roles(exp)).to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
