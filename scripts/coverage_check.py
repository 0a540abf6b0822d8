"""Coverage of the 95% user-clustered interval over a grid of small and large samples, designs and estimands.

    PYTHONPATH=. python scripts/coverage_check.py [--simulations 2000] [--users 4 6 8 12 20 50]
        [--means 0.3 0.5 0.95] [--iccs 0.1 0.3 0.5] [--kinds binary continuous]
        [--designs uniform quality dominant] [--weightings instance user] [--no-paired]
    PYTHONPATH=. python scripts/coverage_check.py --power 5 10 [--simulations 1000] [--users 6 12 50]

Per cell (score kind x design x weighting x users x true mean x intra-user correlation), `--simulations`
experiments from perseval.metrics.coverage: the mean effective users, the share of estimates whose
interval is withheld (below 2 effective users), and over the intervals given the share that cover the
estimand's true value, the misses below and above, the share of zero-width intervals, their mean
half-width (score points); the naive per-instance interval's coverage; and (paired) the sign-flip test's
type-I error with no true difference and the share of results whose interval excludes 0 exactly when
p < 0.05. Designs: uniform (2-8 instances per user), quality (better users get more instances),
dominant (one user holds a third of the instances). Then: the lowest coverage over the cells with >= 6
effective users (target >= 94%) and over the others. docs/numbers.md holds the tables this prints.
With `--power D...`: instead, the paired test's power (share of p < 0.05) when every user's mean is D
points higher in one cell, per kind, users, mean and ICC (uniform design).
"""
from __future__ import annotations

import argparse
import itertools
import time

from perseval.metrics.coverage import DESIGNS, coverage, power
from perseval.metrics.uncertainty import WEIGHTINGS

TARGET, FROM_USERS = 0.94, 6


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _power_table(args: argparse.Namespace) -> None:
    print(f"{args.simulations} experiments per cell, paired sign-flip test at 0.05, uniform design (percent)")
    print("| kind | users | mean | ICC | " + " | ".join(f"power at {d:g} points" for d in args.power) + " |")
    print("|---|---|---|---|" + "---|" * len(args.power))
    for kind, g, m, icc in itertools.product(args.kinds, args.users, args.means, args.iccs):
        shares = [power(args.simulations, g, m, icc, d / 100, resamples=args.resamples, seed=args.seed, kind=kind)
                  for d in args.power]
        print(f"| {kind} | {g} | {100 * m:.0f} | {icc} | " + " | ".join(_pct(p) for p in shares) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulations", type=int, default=2000)
    ap.add_argument("--users", type=int, nargs="+", default=[4, 6, 8, 12, 20, 50])
    ap.add_argument("--means", type=float, nargs="+", default=[0.3, 0.5, 0.95])
    ap.add_argument("--iccs", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    ap.add_argument("--kinds", nargs="+", default=["binary", "continuous"], choices=["binary", "continuous"])
    ap.add_argument("--designs", nargs="+", default=["uniform"], choices=DESIGNS)
    ap.add_argument("--weightings", nargs="+", default=["instance"], choices=WEIGHTINGS)
    ap.add_argument("--no-paired", action="store_true", help="skip the paired test's type-I error")
    ap.add_argument("--resamples", type=int, default=2000, help="sign-flip patterns above 12 users")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--power", type=float, nargs="+", help="the paired test's power at these differences (points)")
    args = ap.parse_args()
    t0 = time.monotonic()
    if args.power:
        _power_table(args)
        print(f"({time.monotonic() - t0:.0f} s)")
        return
    print(f"{args.simulations} experiments per cell, level 0.95 (percent)")
    print("| kind | design | weighting | users | eff. users | mean | ICC | covers | miss below | miss above | "
          "withheld | zero-width | half-width | naive | paired type-I | interval = test |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst: dict[bool, tuple[float, str]] = {}
    for kind, design, weighting, g, m, icc in itertools.product(args.kinds, args.designs, args.weightings,
                                                                 args.users, args.means, args.iccs):
        c = coverage(args.simulations, g, m, icc, resamples=args.resamples, seed=args.seed, kind=kind,
                     paired=not args.no_paired, design=design, weighting=weighting)
        big = (c.effective_users or 0) >= FROM_USERS
        name = f"{kind} {design} {weighting} {g} users mean {100 * m:.0f} ICC {icc}"
        worst[big] = min(worst.get(big, (1.0, "")), (c.clustered, name))
        print(f"| {kind} | {design} | {weighting} | {g} | {_num(c.effective_users)} | {100 * m:.0f} | {icc} | "
              f"{_pct(c.clustered)} | {_pct(c.miss_low)} | {_pct(c.miss_high)} | {_pct(c.withheld)} | "
              f"{_pct(c.zero_width)} | {_num(c.half_width)} | {_pct(c.naive)} | {_pct(c.type1)} | "
              f"{_pct(c.agree)} |", flush=True)
    if True in worst:
        low, name = worst[True]
        verdict = "holds" if low >= TARGET else "FAILS"
        print(f"lowest coverage with >= {FROM_USERS} effective users: {_pct(low)}% ({name}; {verdict} the "
              f"{100 * TARGET:.0f}% target)")
    if False in worst:
        print(f"lowest coverage with fewer effective users: {_pct(worst[False][0])}% ({worst[False][1]})")
    print(f"({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
