"""Session mining (paper, section 2.1): from behaviour logs to non-trivial search-to-order sessions.

A search-to-order session is a search at t_m followed by an order at t_n with t_n - t_m <= Delta
(2.1.1). Each order is anchored to the earliest search within Delta before it and after the user's
previous order, so the session's first query is the user's earliest, vaguest formulation. Only
sessions whose search falls in the last `session_days` of the log are taken (the paper's 30-day
window); the history is every event in the `history_days` strictly before t_m.

A session is kept only when it is non-trivial (2.1.2), checked in this order:
  outside_session_window  the search is before the session window
  no_reformulation        the last query (the refined one) equals the first (the intent one)
  few_browsed             fewer than `min_browsed` distinct products viewed in the session
  intent_mismatch         a query's category differs from the ordered product's (no query category known
                          counts as a mismatch too): the order must match the session's intent
  sparse_history          fewer than `min_history` events in the history window (the user is not active
                          enough in the 60 days before the search)
A query's category is its `category` tag when the log has one, else the most viewed category between
it and the next search. One session is kept per user: the latest (or earliest) non-trivial one.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field

from perseval.benchmarks.apeb.logs import Event
from perseval.kernel.params import Params

FILTER_REASONS = ("outside_session_window", "no_reformulation", "few_browsed", "intent_mismatch", "sparse_history")


class MiningConfig(Params):
    delta_minutes: float = Field(30, gt=0)  # search-to-order window
    history_days: int = Field(60, ge=1)  # history before the search
    session_days: int | None = Field(30, ge=1)  # sessions from the last N days of the log; None: all of it
    min_browsed: int = Field(5, ge=0)  # distinct products viewed in the session
    min_history: int = Field(10, ge=0)  # events in the history window
    keep: Literal["latest", "earliest"] = "latest"  # which non-trivial session of a user is kept


def norm_query(q: str) -> str:
    return " ".join(q.lower().split())


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
        return [e.text for e in self.events if e.action == "search"]

    @property
    def intent_query(self) -> str:
        return self.queries[0]

    @property
    def refined_query(self) -> str:
        return self.queries[-1]

    @property
    def purchased(self) -> str:
        return self.events[-1].product_id

    @property
    def category(self) -> str:
        return self.events[-1].category

    @property
    def browsed(self) -> list[str]:
        """Distinct products viewed in the session, in first-view order."""
        return list(dict.fromkeys(e.product_id for e in self.events[:-1] if e.on_product and e.action == "view"))

    @property
    def considered(self) -> list[str]:
        """Distinct products viewed, liked or put in the cart in the session (the hard candidates' core)."""
        return list(dict.fromkeys(e.product_id for e in self.events[:-1] if e.on_product))

    def query_categories(self) -> list[str]:
        """Each query's category: its tag, else the most viewed product category until the next search ('')."""
        out, searches = [], [i for i, e in enumerate(self.events) if e.action == "search"]
        for n, i in enumerate(searches):
            if self.events[i].category:
                out.append(self.events[i].category)
                continue
            stop = searches[n + 1] if n + 1 < len(searches) else len(self.events) - 1
            seen = Counter(e.category for e in self.events[i + 1:stop] if e.on_product and e.category)
            out.append(seen.most_common(1)[0][0] if seen else "")
        return out

    def summary(self) -> dict:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(),
                "minutes": round((self.end - self.start).total_seconds() / 60, 2), "queries": self.queries,
                "browsed": len(self.browsed), "considered": self.considered, "category": self.category,
                "n_events": len(self.events), "history_events": len(self.history)}


@dataclass
class MiningResult:
    sessions: list[Session]  # kept: one per user, in user order
    counts: Counter
    rejected: list[tuple[str, datetime, str]] = field(default_factory=list)  # (user, search time, reason)


def split_sessions(user_id: str, events: list[Event], delta: timedelta, counts: Counter) -> list[Session]:
    """Every search-to-order session of one user (events in time order)."""
    sessions, after = [], 0
    for i, ev in enumerate(events):
        if ev.action != "order":
            continue
        searches = [j for j in range(after, i) if events[j].action == "search"]
        after = i + 1
        in_window = [j for j in searches if ev.ts - events[j].ts <= delta]
        if not in_window:
            counts["order_without_search" if not searches else "order_outside_delta"] += 1
            continue
        sessions.append(Session(user_id, events[in_window[0]: i + 1]))
    return sessions


def history_before(events: list[Event], t_m: datetime, days: int) -> list[Event]:
    """Events in [t_m - days, t_m): strictly before the search (events are in time order)."""
    lo = bisect.bisect_left(events, t_m - timedelta(days=days), key=lambda e: e.ts)
    hi = bisect.bisect_left(events, t_m, key=lambda e: e.ts)
    return events[lo:hi]


def trivial_reason(session: Session, cfg: MiningConfig, window_start: datetime | None) -> str | None:
    """Why a session is filtered out (FILTER_REASONS), or None when it is kept."""
    if window_start is not None and session.start < window_start:
        return "outside_session_window"
    if norm_query(session.intent_query) == norm_query(session.refined_query):
        return "no_reformulation"
    if len(session.browsed) < cfg.min_browsed:
        return "few_browsed"
    cats = session.query_categories()
    if not any(cats) or any(c and c != session.category for c in cats):
        return "intent_mismatch"
    if len(session.history) < cfg.min_history:
        return "sparse_history"
    return None


def log_end(events_by_user: dict[str, list[Event]]) -> datetime | None:
    return max((evs[-1].ts for evs in events_by_user.values() if evs), default=None)


def mine_sessions(events_by_user: dict[str, list[Event]], cfg: MiningConfig | None = None) -> MiningResult:
    """One non-trivial session per user that has one, with its history."""
    cfg = cfg or MiningConfig()
    counts: Counter = Counter()
    kept: list[Session] = []
    rejected: list[tuple[str, datetime, str]] = []
    delta = timedelta(minutes=cfg.delta_minutes)
    end = log_end(events_by_user)
    window_start = end - timedelta(days=cfg.session_days) if cfg.session_days and end else None
    for user_id, events in events_by_user.items():
        found = split_sessions(user_id, events, delta, counts)
        counts["sessions_found"] += len(found)
        good = []
        for s in found:
            s.history = history_before(events, s.start, cfg.history_days)
            reason = trivial_reason(s, cfg, window_start)
            if reason:
                counts[f"filtered_{reason}"] += 1
                rejected.append((user_id, s.start, reason))
            else:
                good.append(s)
        if good:
            kept.append(good[-1] if cfg.keep == "latest" else good[0])
            counts["extra_sessions_dropped"] += len(good) - 1
    counts["users"] = len(events_by_user)
    counts["sessions_kept"] = len(kept)
    return MiningResult(kept, counts, rejected)
