"""Evidence planning: which preference signals an instance's history carries, in which turns.

A *signal* is one (dimension, value, phase) a turn reveals; a *turn* is one
user message and may carry several signals. Turns combine signals only when an
instance has fewer evidence turns than signals (Table 2 has many instances with
one evidence item and three or more constraints); a turn never carries both the
old and the new value of one dynamic preference, and every old value comes
before its new value.

Each signal is tagged with its Table 12 category and score contribution; a
turn's salience is their sum, capped at 10 (5 is the paper's retention
threshold). It is the signal part of what IBA-Agent's re-ranker gives the turn:
the re-ranker adds a task-relevance start (agents/iba_agent/salience.py).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from perseval.benchmarks.evidence_kinds import SALIENCE_CAP, TABLE12
from perseval.benchmarks.iba.personas import Persona, transition_phrase
from perseval.benchmarks.iba.taxonomy import Scenario, Value

# Share of each evidence kind: implicit behaviour dominates, direct statements are occasional.
KIND_WEIGHTS = {"behaviour": 0.35, "correction": 0.25, "complaint": 0.15, "rejection": 0.15, "statement": 0.10}
# A change of preference is announced more explicitly than it is acted out.
NEW_PHASE_WEIGHTS = {"behaviour": 0.10, "correction": 0.40, "complaint": 0.15, "rejection": 0.15, "statement": 0.20}
RETENTION_THRESHOLD = 5  # the paper's retention threshold on a turn's salience (perseval.benchmarks.evidence_kinds)
PHASE_ORDER = {"old": 0, "static": 1, "new": 2}
ACKS = (
    "Got it, I'll keep that in mind.",
    "Understood, updated.",
    "Noted.",
    "Makes sense, I've adjusted it.",
    "Thanks for telling me.",
    "Sounds good!",
)


@dataclass(frozen=True)
class Preference:
    dimension_id: str
    value: str  # the gold (current) value
    previous: str | None = None  # set for a dynamic preference: the value it replaced

    @property
    def dynamic(self) -> bool:
        return self.previous is not None


@dataclass(frozen=True)
class Signal:
    dimension: str
    value: str
    phase: str  # static | old | new


@dataclass(frozen=True)
class Support:
    """A realised signal: its kind, Table 12 category and weight, and the template sentence."""

    dimension: str
    value: str
    phase: str
    kind: str
    evidence_type: str
    salience: int
    sentence: str

    def meta(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "value": self.value, "kind": self.kind,
                "dynamic_phase": self.phase, "evidence_type": self.evidence_type, "salience": self.salience}


# --- which signals --------------------------------------------------------------------


def base_signals(pref: Preference) -> list[Signal]:
    if pref.dynamic:
        return [Signal(pref.dimension_id, pref.previous or "", "old"), Signal(pref.dimension_id, pref.value, "new")]
    return [Signal(pref.dimension_id, pref.value, "static")]


def extra_signal(pref: Preference, rng: random.Random) -> Signal:
    """One more signal for `pref`: a repeat of its static value, or of its old or new value."""
    if not pref.dynamic:
        return Signal(pref.dimension_id, pref.value, "static")
    if rng.random() < 0.5:
        return Signal(pref.dimension_id, pref.previous or "", "old")
    return Signal(pref.dimension_id, pref.value, "new")


def simple_signals(prefs: Sequence[Preference], extra_rate: float, rng: random.Random) -> list[Signal]:
    """The thin-slice plan: each value gets one signal, plus a second one with chance `extra_rate`."""
    out = []
    for base in (s for p in prefs for s in base_signals(p)):
        out += [base] * (1 + (rng.random() < extra_rate))
    return out


def order_signals(signals: Sequence[Signal], rng: random.Random) -> list[Signal]:
    """A random order in which each dimension's old-phase signals precede its new-phase ones."""
    order = list(signals)
    rng.shuffle(order)
    by_dim: dict[str, list[int]] = {}
    for i, s in enumerate(order):
        by_dim.setdefault(s.dimension, []).append(i)
    for idxs in by_dim.values():
        ranked = sorted((order[i] for i in idxs), key=lambda s: PHASE_ORDER[s.phase])
        for i, s in zip(idxs, ranked):
            order[i] = s
    return order


# --- into turns ---------------------------------------------------------------------------


def required_cuts(order: Sequence[Signal]) -> set[int]:
    """Fewest cut points (gap g lies before position g) that separate each old signal from its new one."""
    spans = []
    for i, s in enumerate(order):
        if s.phase == "old":
            j = next(j for j in range(i + 1, len(order)) if order[j].dimension == s.dimension
                     and order[j].phase == "new")
            spans.append((i, j))
    cuts: set[int] = set()
    for i, j in sorted(spans, key=lambda p: p[1]):  # greedy interval stabbing by right end
        if not any(i < g <= j for g in cuts):
            cuts.add(j)
    return cuts


def pack(signals: Sequence[Signal], n_turns: int, rng: random.Random) -> list[list[Signal]]:
    """Signals in `n_turns` ordered, non-empty turns (n_turns <= len(signals); >= 2 if any is dynamic)."""
    order = order_signals(signals, rng)
    cuts = required_cuts(order)
    if len(cuts) > n_turns - 1:  # too many interleaved changes: put every old value first
        olds = [s for s in signals if s.phase == "old"]
        rest = [s for s in signals if s.phase != "old"]
        rng.shuffle(olds)
        rng.shuffle(rest)
        order, cuts = olds + rest, {len(olds)}
    free = [g for g in range(1, len(order)) if g not in cuts]
    cuts |= set(rng.sample(free, n_turns - 1 - len(cuts)))
    bounds = [0, *sorted(cuts), len(order)]
    return [list(order[a:b]) for a, b in zip(bounds, bounds[1:])]


def plan_turns(prefs: Sequence[Preference], n_turns: int, rng: random.Random) -> list[list[Signal]]:
    """Exactly `n_turns` evidence turns covering every preference (Table 2 mode)."""
    signals = [s for p in prefs for s in base_signals(p)]
    if n_turns < len(signals):
        return pack(signals, n_turns, rng)
    signals += [extra_signal(rng.choice(list(prefs)), rng) for _ in range(n_turns - len(signals))]
    return [[s] for s in order_signals(signals, rng)]


# --- surface text ---------------------------------------------------------------------------


def _pick_kinds(value: Value, n: int, rng: random.Random, weights: Mapping[str, float]) -> list[str]:
    """n evidence kinds for one value, distinct while the value has enough kinds."""
    chosen: list[str] = []
    for _ in range(n):
        pool = [k for k in value.evidence if k not in chosen] or list(value.evidence)
        chosen.append(rng.choices(pool, weights=[weights.get(k, 0.1) for k in pool])[0])
    return chosen


def realise(turns: list[list[Signal]], scenario: Scenario, rng: random.Random) -> list[list[Support]]:
    """Kinds and template sentences; repeated signals of one value get different kinds where possible."""
    counts: dict[Signal, int] = {}
    for turn in turns:
        for s in turn:
            counts[s] = counts.get(s, 0) + 1
    kinds: dict[Signal, list[str]] = {}
    for s, n in counts.items():
        weights = NEW_PHASE_WEIGHTS if s.phase == "new" else KIND_WEIGHTS
        kinds[s] = _pick_kinds(scenario.dimension(s.dimension).value(s.value), n, rng, weights)
    out = []
    for turn in turns:
        supports = []
        for s in turn:
            kind = kinds[s].pop(0)
            value = scenario.dimension(s.dimension).value(s.value)
            category, low, high = TABLE12[kind]
            weight = high if s.phase == "new" else low  # an announced change is the most explicit signal
            supports.append(Support(s.dimension, s.value, s.phase, kind, category, weight,
                                    rng.choice(value.evidence[kind])))
        out.append(supports)
    return out


def turn_text(supports: Sequence[Support], persona: Persona, rng: random.Random) -> str:
    """One exchange; a new value is introduced by what changed in the persona's short-term state or role."""
    parts = [f"{transition_phrase(persona, rng)} {s.sentence}" if s.phase == "new" else s.sentence
             for s in supports]
    return f"User: {' '.join(parts)}\nAssistant: {rng.choice(ACKS)}"


def turn_meta(scenario: Scenario, supports: Sequence[Support]) -> dict[str, Any]:
    """Ground truth of an evidence turn: the first signal flat (older readers), all under `supports`."""
    first = supports[0].meta()
    salience = min(SALIENCE_CAP, sum(s.salience for s in supports))
    return {"scenario": scenario.name, **first, "salience": salience,
            "supports": [s.meta() for s in supports]}
