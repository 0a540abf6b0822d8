"""Print the cross-benchmark summary of a finished run from its record: one row per kind of agent (history, no
history, oracle), one column per benchmark, each cell the headline score with its user-clustered interval and
users ("—" where the cell's judge does not discriminate). A run of two benchmarks or more logs the same table as
its parent run's cross_benchmark.md.

usage: python scripts/cross_benchmark_table.py RECORD
(RECORD: the run's record.json, or its folder <output_root>/records/<run id>/, as `perseval run` prints it)
"""
from __future__ import annotations

import sys

from perseval.report.record import RecordError, read_record
from perseval.report.views.cross_benchmark import cross_benchmark_table


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        record = read_record(argv[0])
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(cross_benchmark_table(record.cells).to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
