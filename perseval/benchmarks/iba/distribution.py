"""Table 2 of the IBA-Bench paper as data, and the quotas that make a build follow it.

A `table2` build fixes, per domain, how many instances it has and how many of
them carry 1, 2, 3, 4 or 5+ evidence turns and 1..5+ preference constraints.
Quotas are exact (largest remainder), not sampled, so even a small build
matches the paper's proportions up to rounding; a constraint count is never
larger than its scenario's number of dimensions, and what had to be clamped is
reported rather than hidden.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence, TypeVar

from perseval.benchmarks.iba.taxonomy import Scenario, Taxonomy

BUCKETS = ("1", "2", "3", "4", "5+")
FULL_SIZE = 6962  # instances of the released benchmark (Table 2, Overall)
OVERALL = "Overall"


@dataclass(frozen=True)
class DomainRow:
    """One row of Table 2: scenarios, dimensions, instances and the two count distributions."""

    scenarios: int
    dimensions: int
    instances: int
    evidence: tuple[int, int, int, int, int]  # instances with 1, 2, 3, 4, 5+ evidence items
    constraints: tuple[int, int, int, int, int]  # instances with 1, 2, 3, 4, 5+ constraints


TABLE2: dict[str, DomainRow] = {
    "Writing and Design": DomainRow(16, 55, 750, (271, 267, 83, 61, 68), (66, 199, 282, 160, 43)),
    "Work": DomainRow(12, 53, 1155, (394, 380, 165, 111, 105), (30, 161, 338, 321, 305)),
    "Daily Consumption": DomainRow(8, 39, 1086, (511, 290, 217, 36, 32), (46, 182, 401, 276, 181)),
    "Planning": DomainRow(10, 39, 1151, (532, 329, 182, 42, 66), (41, 206, 489, 386, 29)),
    "Exercise and Health": DomainRow(4, 16, 781, (325, 247, 113, 41, 55), (11, 54, 173, 252, 291)),
    "Transportation": DomainRow(4, 14, 518, (288, 117, 112, 0, 1), (21, 67, 169, 197, 64)),
    "Medical Services": DomainRow(3, 11, 524, (290, 113, 121, 0, 0), (18, 90, 231, 185, 0)),
    "Leisure Activities": DomainRow(3, 9, 333, (137, 104, 62, 16, 14), (12, 60, 148, 113, 0)),
    "Information Management": DomainRow(6, 26, 664, (293, 217, 94, 29, 31), (23, 73, 185, 161, 222)),
    OVERALL: DomainRow(66, 262, 6962, (3041, 2064, 1149, 336, 372), (268, 1092, 2416, 2051, 1135)),
}
# How many evidence turns a "5+" instance gets: the paper gives only the bucket, so keep it near 5.
FIVE_PLUS_EVIDENCE = {5: 0.50, 6: 0.25, 7: 0.15, 8: 0.10}

K = TypeVar("K", bound=Hashable)


def bucket(n: int) -> str:
    return "5+" if n >= 5 else str(n)


def row_for(domain: str) -> DomainRow:
    """The domain's Table 2 row; a domain the paper does not have follows the Overall row."""
    return TABLE2.get(domain, TABLE2[OVERALL])


def largest_remainder(weights: Mapping[K, float], total: int) -> dict[K, int]:
    """Integers proportional to `weights` that sum to exactly `total` (Hamilton's method)."""
    mass = sum(weights.values())
    if total <= 0 or mass <= 0:
        return {k: 0 for k in weights}
    raw = {k: total * w / mass for k, w in weights.items()}
    out = {k: int(v) for k, v in raw.items()}
    short = total - sum(out.values())
    # ties broken by insertion order, so the result is deterministic
    for k in sorted(raw, key=lambda k: out[k] - raw[k])[:short]:
        out[k] += 1
    return out


# --- how many instances each scenario gets ----------------------------------------------


def full_scenario_counts(taxonomy: Taxonomy) -> dict[str, int]:
    """Instances per scenario in the full-size build.

    A scenario with `instances` (Table 13's I) gets exactly that many; the rest of its
    domain's Table 2 count is spread evenly over the domain's scenarios without one. A
    domain the paper does not list gets the paper's mean per scenario for each scenario.
    """
    counts: dict[str, int] = {}
    mean = TABLE2[OVERALL].instances / TABLE2[OVERALL].scenarios
    for domain in taxonomy.domains:
        group = [s for s in taxonomy.scenarios if s.domain == domain]
        given = {s.name: int(getattr(s, "instances", None) or 0) for s in group}
        counts.update({n: i for n, i in given.items() if i > 0})
        rest = [s.name for s in group if given[s.name] <= 0]
        if not rest:
            continue
        total = TABLE2[domain].instances if domain in TABLE2 else round(mean * len(group))
        left = max(0, total - sum(counts.get(s.name, 0) for s in group))
        counts.update(largest_remainder({n: 1.0 for n in rest}, left))
    return counts


def missing_domains(taxonomy: Taxonomy) -> list[str]:
    """Table 2 domains the taxonomy has no scenario for (a full-size build cannot reach 6,962 without them)."""
    return [d for d in TABLE2 if d != OVERALL and d not in taxonomy.domains]


def scenario_counts(taxonomy: Taxonomy, pool: Sequence[Scenario], sample: int | None) -> dict[str, int]:
    """Instances per scenario of `pool`: the full-size counts, or those scaled to `sample`."""
    full = full_scenario_counts(taxonomy)
    weights = {s.name: float(full.get(s.name, 0)) for s in pool}
    if sample is None:
        return {n: int(w) for n, w in weights.items()}
    if sum(weights.values()) <= 0:  # e.g. a filter to scenarios whose count is 0: spread evenly
        weights = {n: 1.0 for n in weights}
    return largest_remainder(weights, sample)


# --- per-instance counts -----------------------------------------------------------------


def bucket_quota(counts: Sequence[int], n: int) -> dict[str, int]:
    """A Table 2 distribution (counts for 1..5+) scaled to `n` instances."""
    return largest_remainder(dict(zip(BUCKETS, (float(c) for c in counts))), n)


def evidence_counts(n: int, row: DomainRow, rng: random.Random) -> list[int]:
    """n evidence counts following the row's #Evidence distribution, in random order."""
    out: list[int] = []
    for b, k in bucket_quota(row.evidence, n).items():
        for _ in range(k):
            out.append(_five_plus(rng) if b == "5+" else int(b))
    rng.shuffle(out)
    return out


def _five_plus(rng: random.Random) -> int:
    return rng.choices(list(FIVE_PLUS_EVIDENCE), weights=list(FIVE_PLUS_EVIDENCE.values()))[0]


def constraint_counts(capacities: Sequence[int], row: DomainRow, rng: random.Random) -> tuple[list[int], int]:
    """A constraint count per instance (capacity = its scenario's dimensions); also how many were clamped.

    Largest buckets are placed first, each on a random instance that can hold it: with nested
    capacities any such choice keeps the rest feasible, so clamping happens only when the
    taxonomy truly lacks scenarios with enough dimensions.
    """
    n = len(capacities)
    wanted: list[str] = [b for b, k in bucket_quota(row.constraints, n).items() for _ in range(k)]
    out = [0] * n
    free = list(range(n))
    rng.shuffle(free)
    clamped = 0
    for b in sorted(wanted, key=BUCKETS.index, reverse=True):
        low = 5 if b == "5+" else int(b)
        fits = [i for i in free if capacities[i] >= low]
        i = fits[0] if fits else max(free, key=lambda j: capacities[j])
        free.remove(i)
        out[i] = rng.randint(low, capacities[i]) if (b == "5+" and fits) else min(low, capacities[i])
        clamped += not fits
    return out, clamped


def histogram(values: Sequence[int]) -> dict[str, int]:
    c = Counter(bucket(v) for v in values)
    return {b: c.get(b, 0) for b in BUCKETS}


def distribution_report(by_domain: Mapping[str, tuple[list[int], list[int]]]) -> dict[str, dict]:
    """Per domain: target (Table 2 scaled to the build) vs achieved histograms of both counts."""
    report = {}
    for domain, (evidence, constraints) in sorted(by_domain.items()):
        row, n = row_for(domain), len(evidence)
        report[domain] = {
            "n": n,
            "evidence": {"target": bucket_quota(row.evidence, n), "achieved": histogram(evidence)},
            "constraints": {"target": bucket_quota(row.constraints, n), "achieved": histogram(constraints)},
        }
    return report
