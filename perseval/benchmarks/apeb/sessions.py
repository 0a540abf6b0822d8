"""Session mining: from behaviour logs to non-trivial search-to-order sessions.

A search-to-order session (paper, section 2.1.1) is a search at t_m followed
by an order at t_n with t_n - t_m <= Delta. Each order is anchored to the
earliest search within Delta before it (and after the previous order), so the
session's first query is the user's earliest, vaguest formulation. The
history is every event in the `history_days` before t_m. A session is kept
only when it is non-trivial (section 2.1.2): the query was reformulated,
enough distinct products were browsed, and the order falls in the category
the first search was about.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from perseval.benchmarks.apeb.catalog import Catalog
from perseval.benchmarks.apeb.logs import Event

FILTER_REASONS = ("no_reformulation", "few_browsed", "intent_mismatch", "sparse_history")


@dataclass(frozen=True)
class MiningConfig:
    delta_minutes: float = 30
    history_days: int = 60
    min_browsed: int = 3
    min_history: int = 10  # users need enough interactions before the session


@dataclass
class Session:
    user_id: str
    events: list[Event]  # from the first search to the order, inclusive
    history: list[Event] = field(default_factory=list)

    @property
    def start(self) -> datetime:
        return self.events[0].ts

    @property
    def end(self) -> datetime:
        return self.events[-1].ts

    @property
    def queries(self) -> list[str]:
        return [e.text for e in self.events if e.kind == "search"]

    @property
    def intent_query(self) -> str:
        return self.queries[0]

    @property
    def refined_query(self) -> str:
        return self.queries[-1]

    @property
    def intent_category(self) -> str:
        return self.events[0].category

    @property
    def purchased(self) -> str:
        return self.events[-1].product_id

    @property
    def category(self) -> str:
        return self.events[-1].category

    @property
    def viewed(self) -> list[str]:
        """Distinct products viewed in the session, in first-view order."""
        return list(dict.fromkeys(e.product_id for e in self.events if e.kind == "view"))

    def summary(self) -> dict:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "queries": self.queries,
                "viewed": self.viewed, "category": self.category, "history_events": len(self.history)}


@dataclass
class MiningResult:
    sessions: list[Session]  # kept: one per user
    counts: Counter


def _norm(q: str) -> str:
    return " ".join(q.lower().split())


def split_sessions(user_id: str, events: list[Event], delta: timedelta, counts: Counter) -> list[Session]:
    """Every search-to-order session of one user (events in time order)."""
    sessions, after = [], 0
    for i, ev in enumerate(events):
        if ev.kind != "order":
            continue
        searches = [j for j in range(after, i) if events[j].kind == "search"]
        after = i + 1
        in_window = [j for j in searches if ev.ts - events[j].ts <= delta]
        if not in_window:
            counts["order_without_search" if not searches else "order_outside_delta"] += 1
            continue
        sessions.append(Session(user_id, events[in_window[0] : i + 1]))
    return sessions


def trivial_reason(session: Session, cfg: MiningConfig) -> str | None:
    """Why a session is filtered out, or None when it is kept."""
    if _norm(session.intent_query) == _norm(session.refined_query):
        return "no_reformulation"
    if len(session.viewed) < cfg.min_browsed:
        return "few_browsed"
    if session.category != session.intent_category:
        return "intent_mismatch"
    if len(session.history) < cfg.min_history:
        return "sparse_history"
    return None


def history_before(events: list[Event], t_m: datetime, days: int) -> list[Event]:
    start = t_m - timedelta(days=days)
    return [e for e in events if start <= e.ts < t_m]


def mine_sessions(events_by_user: dict[str, list[Event]], cfg: MiningConfig) -> MiningResult:
    """Keep the latest non-trivial session of each user, with its history."""
    counts: Counter = Counter()
    kept: list[Session] = []
    delta = timedelta(minutes=cfg.delta_minutes)
    for user_id, events in events_by_user.items():
        found = split_sessions(user_id, events, delta, counts)
        counts["sessions_found"] += len(found)
        good = []
        for s in found:
            s.history = history_before(events, s.start, cfg.history_days)
            reason = trivial_reason(s, cfg)
            if reason:
                counts[f"filtered_{reason}"] += 1
            else:
                good.append(s)
        if good:
            kept.append(good[-1])
            counts["extra_sessions_dropped"] += len(good) - 1
    counts["sessions_kept"] = len(kept)
    return MiningResult(kept, counts)


def hard_candidates(session: Session, catalog: Catalog, seed: int, min_size: int = 10) -> list[str]:
    """The products the user considered plus the purchase, padded with same-category products."""
    rng = random.Random(f"{seed}:hard:{session.user_id}")
    ids = list(dict.fromkeys([*session.viewed, session.purchased]))
    pool = [p.product_id for p in catalog.in_category(session.category) if p.product_id not in ids]
    ids += rng.sample(pool, min(len(pool), max(0, min_size - len(ids))))
    rng.shuffle(ids)
    return ids


def random_candidates(session: Session, catalog: Catalog, seed: int, size: int = 10) -> list[str]:
    """The purchase plus `size - 1` products drawn from the whole catalog."""
    rng = random.Random(f"{seed}:random:{session.user_id}")
    pool = [p.product_id for p in catalog.products if p.product_id != session.purchased]
    ids = [session.purchased, *rng.sample(pool, min(len(pool), size - 1))]
    rng.shuffle(ids)
    return ids
