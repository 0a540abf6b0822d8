"""Coverage of the 95% user-clustered interval over a grid of small and large samples (issue 31).

    PYTHONPATH=. python scripts/coverage_check.py [--simulations 2000] [--users 4 6 8 12 20 50]
        [--means 0.3 0.5 0.95] [--iccs 0.1 0.3 0.5] [--kinds binary continuous] [--no-paired]

Per cell (users x true mean x intra-user correlation x score kind), `--simulations` experiments from
perseval.metrics.coverage: the share of intervals that cover the true mean, the misses below and above,
the share of zero-width intervals, their mean half-width (score points), the naive per-instance
interval's coverage, and (paired) the sign-flip test's type-I error with no true difference and the share
of results whose interval excludes 0 exactly when p < 0.05. Then: the lowest coverage over the cells with
>= 6 users (target >= 94%) and at 4 users.
docs/numbers.md holds the table this prints.
"""
from __future__ import annotations

import argparse
import itertools
import time

from perseval.metrics.coverage import coverage

TARGET, FROM_USERS = 0.94, 6


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulations", type=int, default=2000)
    ap.add_argument("--users", type=int, nargs="+", default=[4, 6, 8, 12, 20, 50])
    ap.add_argument("--means", type=float, nargs="+", default=[0.3, 0.5, 0.95])
    ap.add_argument("--iccs", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    ap.add_argument("--kinds", nargs="+", default=["binary", "continuous"], choices=["binary", "continuous"])
    ap.add_argument("--no-paired", action="store_true", help="skip the paired test's type-I error")
    ap.add_argument("--resamples", type=int, default=2000, help="sign-flip patterns above 12 users")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.monotonic()
    print(f"{args.simulations} experiments per cell, 2-8 instances per user, level 0.95 (percent)")
    print("| kind | users | mean | ICC | covers | miss below | miss above | zero-width | half-width | naive | "
          "paired type-I | interval = test |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst: dict[bool, float] = {}
    for kind, g, m, icc in itertools.product(args.kinds, args.users, args.means, args.iccs):
        c = coverage(args.simulations, g, m, icc, resamples=args.resamples, seed=args.seed, kind=kind,
                     paired=not args.no_paired)
        big = g >= FROM_USERS
        worst[big] = min(worst.get(big, 1.0), c.clustered)
        print(f"| {kind} | {g} | {100 * m:.0f} | {icc} | {_pct(c.clustered)} | {_pct(c.miss_low)} | "
              f"{_pct(c.miss_high)} | {_pct(c.zero_width)} | {_num(c.half_width)} | {_pct(c.naive)} | "
              f"{_pct(c.type1)} | {_pct(c.agree)} |", flush=True)
    if True in worst:
        verdict = "holds" if worst[True] >= TARGET else "FAILS"
        print(f"lowest coverage with >= {FROM_USERS} users: {_pct(worst[True])}% ({verdict} the {100 * TARGET:.0f}% target)")
    if False in worst:
        print(f"lowest coverage with fewer users: {_pct(worst[False])}%")
    print(f"({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
