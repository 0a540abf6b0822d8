"""Per plain cell: its own score against a swapped-history control and a no-history agent, as typed gains.

personalization gain = own - swapped-history (is it THIS user's history that helps?), history gain =
own - no-history (does history help at all?). Both are paired over the instances the two cells share,
with intervals over users (perseval.metrics.uncertainty.paired_difference), in score points; the
reference's score and `own` are means over those same instances, so own - reference_score = gain.
The gains' p-values are Holm-adjusted together, every gain of the run's interpretable cells in one family
(and, per metric, every (cell, metric) personalization gain in another).

The no-history reference of an agent is an agent of the same benchmark entry that uses no history
(perseval.pipeline.controls.uses_history) but a backbone: of the same kind when there is one (iba-rag ->
iba-no-history, apeb-direct -> apeb-no-history, bespoke-raw-history -> bespoke-no-context), else the
one whose name says no-history / no-context. It is compared on the same backbone and judge.
An agent that uses no history has both gains 0 by construction (its output cannot depend on whose
history it is, nor on any): no swapped run is made for it, and its controls say so. A cell whose judge
does not discriminate gets no gain: its scores mean nothing, nor do their differences.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import pandas as pd

from perseval.core.instances import AgentOutput, Instance, InstanceScore
from perseval.core.store import StageStore
from perseval.experiment.config import ResolvedExperiment
from perseval.experiment.load import bound
from perseval.metrics.aggregate import per_instance, scores_frame
from perseval.metrics.uncertainty import holm, paired_difference
from perseval.pipeline.controls import SWAPPED_HISTORY, uses_history
from perseval.pipeline.units import Cell, Plan
from perseval.pipeline.stages import evidence_documents, load_instances
from perseval.report.analyses.attribution import attribution, evidence_recall, evidence_turns
from perseval.report.record import Attribution, Controls, Gain, MetricGain
from perseval.report.words import NO_HISTORY_NOTE, NOT_INTERPRETABLE

NO_HISTORY_NAMES = ("no-history", "no-context")
Label = Callable[[Cell], str]


def _per_instance(root: str, cell: Cell) -> Any:
    store = StageStore(root, "score", cell.key)
    return per_instance(scores_frame(store.read_records(InstanceScore) if store.parts() else []))


def _by_metric(inst: Any) -> dict[str, dict[str, float]]:
    return {str(m): {str(i): float(v) for i, v in zip(g["instance_id"], g["value"])}
            for m, g in inst.groupby("metric")}


def _needs(exp: ResolvedExperiment, agent: str) -> frozenset[str]:
    return bound(exp).agents[agent].needs


def no_history_agent(exp: ResolvedExperiment, bench_index: int, agent: str) -> str | None:
    """The no-history reference of `agent` in its benchmark entry (see the module doc), or None."""
    entry = exp.experiment.benchmarks[bench_index]
    candidates = [a for a in entry.agents if a != agent and "llm" in _needs(exp, a) and not uses_history(_needs(exp, a))]
    same_kind = [a for a in candidates if exp.agents[a].kind == exp.agents[agent].kind]
    named = [a for a in candidates if any(n in a for n in NO_HISTORY_NAMES)]
    found = same_kind or named
    return found[0] if found else None


def _identity(cell: Cell) -> tuple[Any, ...]:
    return cell.bench_index, cell.agent, cell.backbone, cell.retriever, cell.judge


def _mean(values: list[float]) -> float | None:
    kept = [v for v in values if v == v]
    return sum(kept) / len(kept) if kept else None


def _shared(a: dict[str, float], b: dict[str, float]) -> list[str]:
    """The instances both cells scored."""
    return sorted(i for i in set(a) & set(b) if a[i] == a[i] and b[i] == b[i])


class Values:
    """Each cell's instance values and their users (the cluster the score stage gave each instance), read once
    per track (content-addressed outputs)."""

    def __init__(self, root: str, metrics: dict[str, str] | None = None):
        self.root, self.metrics = root, dict(metrics or {})  # cell key -> its headline metric
        self._by_cell: dict[str, dict[str, dict[str, float]]] = {}
        self.users: dict[str, str] = {}  # instance id -> its user, of every cell read (one data build each)

    def of(self, cell: Cell) -> dict[str, dict[str, float]]:
        if cell.key not in self._by_cell:
            inst = _per_instance(self.root, cell)
            self._by_cell[cell.key] = _by_metric(inst)
            self.users.update({str(i): str(u) if isinstance(u, str) and u else str(i)  # unknown: its own cluster
                               for i, u in zip(inst["instance_id"], inst["user_id"])})
        return self._by_cell[cell.key]

    def frame(self, cell: Cell) -> Any:
        """Index instance_id; columns user_id, value: the cell's headline metric per instance (what
        perseval.metrics.differences.compare_values takes)."""
        values = self.headline(cell)
        return pd.DataFrame({"user_id": [self.users.get(i, i) for i in values], "value": list(values.values())},
                            index=pd.Index(list(values), name="instance_id"))

    def headline(self, cell: Cell) -> dict[str, float]:
        if cell.key not in self.metrics:
            self.metrics[cell.key] = str(StageStore(self.root, "score", cell.key).manifest().get("headline_metric"))
        return self.of(cell).get(self.metrics[cell.key], {})


def gain(a: dict[str, float], b: dict[str, float], users: dict[str, str], reference: Cell, label: str,
         level: float = 0.95) -> Gain | None:
    """a - b over the instances both scored, so own - reference_score = point exactly: a user whose instances
    one cell lost drops out of all three, not only of the gain."""
    shared = _shared(a, b)
    if not shared:
        return None
    d = paired_difference([a[i] for i in shared], [b[i] for i in shared], [users[i] for i in shared], level=level)
    return Gain(reference=reference.key, reference_label=label, point=d.mean, low=d.ci_low, high=d.ci_high,
                p=d.p_value, instances=d.n, users=d.n_users, own=_mean([a[i] for i in shared]),
                reference_score=_mean([b[i] for i in shared]), small_n=d.small_n)


def by_metric(own: dict[str, dict[str, float]], other: dict[str, dict[str, float]], users: dict[str, str],
              level: float = 0.95) -> list[MetricGain]:
    """The personalization gain on every metric both cells scored."""
    out = []
    for metric in sorted(set(own) & set(other)):
        shared = _shared(own[metric], other[metric])
        if not shared:
            continue
        a, b = [own[metric][i] for i in shared], [other[metric][i] for i in shared]
        d = paired_difference(a, b, [users[i] for i in shared], level=level)
        out.append(MetricGain(metric=metric, own=_mean(a), swapped=_mean(b), point=d.mean, low=d.ci_low,
                              high=d.ci_high, p=d.p_value, instances=d.n, users=d.n_users, small_n=d.small_n))
    return out


def cell_controls(plan: Plan, cell: Cell, label: Label, values: Values) -> Controls | None:
    """A plain cell's controls: its gains against the swapped-history control and the no-history agent, or
    that it uses no history; None when it has neither."""
    exp = plan.exp
    if not uses_history(_needs(exp, cell.agent)):
        return Controls(note=NO_HISTORY_NOTE, zero_by_construction=True)
    by_identity = {(_identity(c), c.run.control.name if c.run.control else None): c for c in plan.cells}
    out = Controls()
    swapped = by_identity.get((_identity(cell), SWAPPED_HISTORY))
    if swapped is not None:
        out.personalization = gain(values.headline(cell), values.headline(swapped), values.users, swapped,
                                   label(swapped), cell.statistics.level)  # at the level the cell is run at
        out.by_metric = by_metric(values.of(cell), values.of(swapped), values.users, cell.statistics.level)
    ref = no_history_agent(exp, cell.bench_index, cell.agent)
    # the reference on the same retriever when it searches a corpus with it (bespoke-no-context), else none
    base = next((by_identity[k] for r in (cell.retriever, "-")
                 if (k := ((cell.bench_index, ref, cell.backbone, r, cell.judge), None)) in by_identity), None) \
        if ref else None
    if base is not None:
        out.history = gain(values.headline(cell), values.headline(base), values.users, base, label(base),
                           cell.statistics.level)
    return out if out.personalization or out.history else None


def controls(plan: Plan, root: str, label: Label, interpretable: set[str],
             values: Values | None = None) -> dict[str, Controls]:
    """Plain cell key -> its Controls, the p-values Holm-adjusted across the run: every gain of an interpretable
    cell in one family, every (cell, metric) gain in another. A cell that is not interpretable gets its note
    only."""
    values = values or Values(root)
    out: dict[str, Controls] = {}
    for cell in plan.cells:
        if cell.run.control is not None:
            continue
        if cell.key not in interpretable:
            out[cell.key] = Controls(note=NOT_INTERPRETABLE)
            continue
        found = cell_controls(plan, cell, label, values)
        if found is not None:
            out[cell.key] = found
    gains = [g for c in out.values() for g in (c.personalization, c.history) if g is not None and g.p is not None]
    for g, p in zip(gains, holm([g.p for g in gains])):
        g.p_holm = p
    metric_gains = [m for c in out.values() for m in c.by_metric if m.p is not None]
    for m, p in zip(metric_gains, holm([m.p for m in metric_gains])):
        m.p_holm = p
    return out


def attributions(plan: Plan, root: str, values: Values, interpretable: set[str]) -> dict[str, Attribution]:
    """Cell key -> its evidence attribution, for cells whose data tags evidence and whose agent records its
    context; the score split is withheld where the cell is not interpretable."""
    out = {}
    for cell in plan.cells:
        evidence = _evidence(root, cell.run.data.key)
        if not evidence:
            continue
        outputs = StageStore(root, "run", cell.run.key).read_records(AgentOutput)
        found = attribution(evidence_recall(outputs, evidence), values.headline(cell))
        if found is not None:
            out[cell.key] = found if cell.key in interpretable else found.model_copy(
                update={"score_reached": None, "score_missed": None})
    return out


@lru_cache(maxsize=8)
def _instances(root: str, dkey: str) -> tuple[Instance, ...]:
    return tuple(load_instances(root, dkey))


@lru_cache(maxsize=8)
def _evidence(root: str, dkey: str) -> dict[str, set[str]]:
    """Instance id -> its evidence doc ids (content-addressed data: safe to keep per process), from the documents
    tagged as evidence alone (of 800,000 LaMP profile items, none is decoded and no text is read)."""
    tagged = evidence_documents(root, dkey)
    return evidence_turns(_instances(root, dkey), tagged) if tagged else {}
