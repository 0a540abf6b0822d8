"""Construction statistics, accumulated instance by instance (a streamed build never holds all turns).

The info has the shape of Table 2 (counts by domain, #evidence and #constraints
histograms), the noise ratio actually achieved, the Table 12 categories of the
evidence, and for a `table2` build the target-vs-achieved distribution per domain.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Mapping

from perseval.benchmarks.iba.distribution import bucket, distribution_report
from perseval.benchmarks.iba.evidence import RETENTION_THRESHOLD
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.core.instances import Document, Instance


class ConstructionStats:
    """`noise_per_evidence`, `table2` (a Table 2-shaped build) and `full_size` describe the build; `notes`
    are its plan's notes, reported as they are."""

    def __init__(self, *, noise_per_evidence: int, table2: bool, full_size: bool, notes: Mapping[str, Any]):
        self.noise_per_evidence, self.table2, self.full_size, self.notes = noise_per_evidence, table2, full_size, notes
        self.n_instances = self.n_documents = self.n_evidence = self.n_dynamic = 0
        self.combined = self.retained = 0
        self.users: set[str] = set()
        self.counters: dict[str, Counter[str]] = defaultdict(Counter)
        self.per_domain: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))

    def add(self, inst: Instance, docs: list[Document]) -> None:
        p, n_dynamic = IbaPayload.of(inst), IbaGold.of(inst).n_dynamic
        self.n_instances += 1
        self.users.add(inst.user_id)
        self.n_documents += len(docs)
        self.n_evidence += p.n_evidence
        self.n_dynamic += n_dynamic
        for key, value in (("by_action_type", p.action_type), ("by_scenario", p.scenario),
                           ("by_domain", inst.group), ("evidence_hist", bucket(p.n_evidence)),
                           ("constraints_hist", bucket(p.n_constraints))):
            self.counters[key][value] += 1
        ev, con = self.per_domain[inst.group]
        ev.append(p.n_evidence)
        con.append(p.n_constraints)
        for d in docs:
            supports = d.meta.get("supports")
            if supports:
                self.combined += len(supports) > 1
                self.retained += d.meta["salience"] >= RETENTION_THRESHOLD
                self.counters["evidence_types"].update(s["evidence_type"] for s in supports)

    def info(self) -> dict[str, Any]:
        n_noise = self.n_documents - self.n_evidence
        info: dict[str, Any] = {
            "n_instances": self.n_instances,
            "n_users": len(self.users),
            "n_documents": self.n_documents,
            "n_evidence": self.n_evidence,
            "n_noise": n_noise,
            "noise_per_evidence": self.noise_per_evidence,
            "noise_ratio": n_noise / self.n_evidence if self.n_evidence else 0.0,
            "n_dynamic_preferences": self.n_dynamic,
            **{k: dict(c) for k, c in sorted(self.counters.items())},
            "distribution": "table2" if self.table2 else "simple",
            "full_size": self.full_size,
            "combined_evidence_turns": self.combined,
            "turns_at_retention_threshold": self.retained,
            **self.notes,
        }
        if self.table2:
            info["table2"] = distribution_report(self.per_domain)
        return info
