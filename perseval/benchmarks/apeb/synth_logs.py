"""Seeded behaviour logs of realistic shape: users with long-term tastes on a content platform that sells.

The log spans `history_days + session_days` days (60 + 30, as in the paper: sessions come from a
30-day window and carry up to 60 days of history), so the miner's window and history cuts are both
exercised. Each user has
- long-term tastes: per category a favourite and a second brand, a price band and two attributes;
  3-4 categories of interest, the first being where the user's real session happens;
- a content-heavy background: mostly videos and live streams unrelated to shopping (noise), plus
  preference evidence (views, likes, carts and orders of liked products, reviews and live sales of
  favourite brands, brand searches) in the categories of interest;
- one real, non-trivial search-to-order session: a vague first query, reformulations, browsing and
  comparing competitors (revisits, likes, carts), and the order of the product that best fits the
  user's taste (unique by construction);
- with `repeat_share`, an earlier non-trivial session in another category (the miner keeps one per user);
- 1-2 planted trivial sessions, each failing one filter (`DECOY_KINDS`), placed on other days.
User i depends only on (seed, i), so a larger sample extends a smaller one.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Iterator

from pydantic import Field

from perseval.benchmarks.apeb.catalog import Catalog, Product
from perseval.benchmarks.apeb.logs import BehaviourLogs, Event
from perseval.benchmarks.apeb.synth_catalog import (CATEGORIES, CATEGORY_BY_KEY, MAX_PER_CATEGORY, CategorySpec,
                                                    band_of, build_catalog)
from perseval.kernel.params import Params

LOG_START = datetime(2025, 1, 1, tzinfo=timezone.utc)
DECOY_KINDS = ("no_reformulation", "order_outside_delta", "few_browsed", "intent_mismatch")

NOISE_VIDEOS = (
    "Cat tries to catch a laser pointer", "Street food tour in Bangkok", "Top 10 football goals this week",
    "How to fold a fitted sheet", "Lo-fi beats to relax", "Travel vlog: three days in Lisbon",
    "Funny dog compilation", "Speedrun of a retro platformer", "Morning routine of a night-shift nurse",
    "Learn five guitar chords", "Baking sourdough for beginners", "Unboxing a vintage camera",
    "Prank gone wrong", "Ten-minute ab workout", "Reacting to old music videos", "Tiny house tour",
)
NOISE_LIVES = (
    "Late-night gaming marathon", "Live concert: indie band", "Q&A with a travel blogger",
    "Cooking live: noodles from scratch", "Chess blitz tournament", "Live painting session",
    "Morning news roundup", "Karaoke night",
)
BAND_WORDS = {"budget": "cheap", "mid-range": "", "premium": "premium"}
STEP_SECONDS = (20, 75)  # between two session events: a session of <= 23 steps stays under 30 minutes
MAX_SESSION_STEPS = 23
TASTE_SHARE = 0.7  # of product interactions in a category of interest; the rest explore the category


class LogConfig(Params):
    """Shape of the generated logs (the benchmark's `params.logs`)."""

    history_days: int = Field(60, ge=7)
    session_days: int = Field(30, ge=7)
    per_category: int = Field(40, ge=12, le=MAX_PER_CATEGORY)  # products per category (12 categories)
    background: tuple[int, int] = (80, 160)  # events per user outside sessions (min, max)
    signal_share: float = Field(0.3, ge=0, le=1)  # share of background events that carry preference evidence
    repeat_share: float = Field(0.2, ge=0, le=1)  # users with an earlier non-trivial session too
    browse: tuple[int, int] = (5, 10)  # competitors browsed in the real session (min, max)


@dataclass(frozen=True)
class CategoryPref:
    brands: tuple[str, str]  # favourite first
    band: str
    attributes: tuple[str, ...]

    def utility(self, p: Product) -> int:
        """0..5: favourite brand 2 (second brand 1), price band 1, each wanted attribute 1."""
        brand = 2 if p.brand == self.brands[0] else int(p.brand == self.brands[1])
        return brand + int(band_of(p) == self.band) + len(set(p.attributes) & set(self.attributes))


@dataclass
class UserProfile:
    user_id: str
    prefs: dict[str, CategoryPref]
    interests: list[str]  # categories the history shows preference evidence for
    session_category: str
    target: str  # the product the real session ends with (ground truth for tests)
    session_start: datetime
    decoys: list[tuple[str, datetime]] = field(default_factory=list)  # (kind, first event) of planted trivial ones
    repeat_start: datetime | None = None  # the earlier non-trivial session, if any


@dataclass
class SyntheticLogs(BehaviourLogs):
    users: list[UserProfile] = field(default_factory=list)


# --- preference evidence and noise ---------------------------------------------------------------


def _prefs_from(prototype: Product, rng: random.Random) -> CategoryPref:
    # the prototype is the unique best product: its brand first, its band, its attributes
    spec = CATEGORY_BY_KEY[prototype.category]
    second = rng.choice([b for b in spec.brands if b != prototype.brand])
    return CategoryPref((prototype.brand, second), band_of(prototype), prototype.attributes)


def _product_event(when: datetime, action: str, p: Product) -> Event:
    return Event(when, action, "product", p.product_id, category=p.category)


def _liked(pref: CategoryPref, catalog: Catalog, cat: str) -> list[Product]:
    return [p for p in catalog.in_category(cat) if pref.utility(p) >= 3] or catalog.in_category(cat)


def _signal(rng: random.Random, when: datetime, cat: str, pref: CategoryPref, liked: list[Product],
            others: list[Product]) -> Event:
    """One event of preference evidence in category `cat` (`liked`: products to the user's taste)."""
    spec = CATEGORY_BY_KEY[cat]
    attr = rng.choice(pref.attributes).replace("-", " ")
    kind = rng.choices(("view", "like", "cart", "order", "video", "live", "search"), (5, 2, 1, 1, 4, 2, 2))[0]
    if kind in ("view", "like", "cart", "order"):
        return _product_event(when, kind, rng.choice(liked))
    if kind == "video":
        return Event(when, rng.choice(("view", "view", "like")), "video",
                     text=f"Review: {pref.brands[0]} {attr} {spec.noun}", category=cat)
    if kind == "live":
        return Event(when, "view", "live", text=f"{rng.choice(pref.brands)} live sale: {spec.noun}", category=cat)
    return Event(when, "search", text=f"{pref.brands[0].lower()} {spec.noun}", category=cat)


def _noise(rng: random.Random, when: datetime, catalog: Catalog) -> Event:
    kind = rng.choices(("video", "live", "view", "search"), (8, 3, 2, 1))[0]
    if kind == "video":
        return Event(when, rng.choice(("view", "view", "view", "like")), "video", text=rng.choice(NOISE_VIDEOS))
    if kind == "live":
        return Event(when, "view", "live", text=rng.choice(NOISE_LIVES))
    p = rng.choice(catalog.products)
    if kind == "view":
        return _product_event(when, "view", p)
    return Event(when, "search", text=CATEGORY_BY_KEY[p.category].noun, category=p.category)


# --- sessions ------------------------------------------------------------------------------------


def _clock(rng: random.Random, start: datetime) -> Iterator[datetime]:
    t = start
    while True:
        yield t
        t += timedelta(seconds=rng.randint(*STEP_SECONDS))


def _queries(rng: random.Random, spec: CategorySpec, pref: CategoryPref) -> list[str]:
    a1, a2 = (a.replace("-", " ") for a in pref.attributes)
    # the refined query names some of what the shopper wants, not always all of it
    specifics = [w for w in (BAND_WORDS[pref.band], a1, a2) if w]
    refined = " ".join([*rng.sample(specifics, rng.randint(1, len(specifics))), spec.noun])
    middle = rng.choice((spec.noun, f"{a1} {spec.noun}", f"{pref.brands[0].lower()} {spec.noun}"))
    return [rng.choice(spec.vague), *([middle] if rng.random() < 0.6 else []), refined]


def _competitors(rng: random.Random, target: Product, catalog: Catalog, n: int) -> list[Product]:
    """Half look-alikes of the target (same brand or a shared attribute), half any product of the category."""
    others = [p for p in catalog.in_category(target.category) if p.product_id != target.product_id]
    alike = [p for p in others if p.brand == target.brand or set(p.attributes) & set(target.attributes)]
    chosen = rng.sample(alike, min(len(alike), n // 2))
    rest = [p for p in others if p not in chosen]
    return chosen + rng.sample(rest, min(len(rest), n - len(chosen)))


def _real_session(rng: random.Random, start: datetime, target: Product, pref: CategoryPref,
                  catalog: Catalog, browse: tuple[int, int]) -> list[Event]:
    spec = CATEGORY_BY_KEY[target.category]
    browsed = _competitors(rng, target, catalog, rng.randint(*browse))
    rng.shuffle(browsed)
    queries = _queries(rng, spec, pref)
    clock = _clock(rng, start)
    events: list[Event] = []
    # the competitors spread between the searches, then a comparison: revisits, a like, a cart
    for query, chunk in zip(queries, [browsed[i::len(queries)] for i in range(len(queries))]):
        events.append(Event(next(clock), "search", text=query, category=spec.key))
        events += [_product_event(next(clock), "view", p) for p in chunk]
    for p in rng.sample(browsed, min(2, len(browsed))):
        events.append(_product_event(next(clock), "view", p))
    if rng.random() < 0.5:
        events.append(_product_event(next(clock), "like", rng.choice(browsed)))
    events.append(_product_event(next(clock), "view", target))
    if rng.random() < 0.5:
        events.append(_product_event(next(clock), "cart", rng.choice(browsed)))
    events.append(_product_event(next(clock), "cart", target))
    events.append(_product_event(next(clock), "order", target))
    assert len(events) <= MAX_SESSION_STEPS, "a generated session must fit inside Delta"
    return events


def _decoy(rng: random.Random, kind: str, start: datetime, catalog: Catalog) -> list[Event]:
    spec = rng.choice(CATEGORIES)
    items = rng.sample(catalog.in_category(spec.key), 6)
    clock = _clock(rng, start)
    searches = [rng.choice(spec.vague)] if kind == "no_reformulation" else [rng.choice(spec.vague), spec.noun]
    viewed = items[:1] if kind == "few_browsed" else items[:6]
    events = [Event(next(clock), "search", text=q, category=spec.key) for q in searches]
    events += [_product_event(next(clock), "view", p) for p in viewed]
    bought = items[0]
    if kind == "intent_mismatch":
        bought = rng.choice([p for p in catalog.products if p.category != spec.key])
    when = next(clock)
    if kind == "order_outside_delta":
        when = start + timedelta(minutes=rng.randint(40, 90))
    return events + [_product_event(when, "order", bought)]


# --- one user ------------------------------------------------------------------------------------


def _daytime(rng: random.Random, day: int) -> datetime:
    """A time between 08:00 and 20:00 on day `day` of the log."""
    return LOG_START + timedelta(days=day, minutes=rng.randint(8 * 60, 20 * 60))


def _busy_spans(events: list[Event]) -> list[tuple[datetime, datetime]]:
    """(first, last) timestamp of each block of session events less than 2 h apart."""
    spans: list[tuple[datetime, datetime]] = []
    for e in sorted(events, key=lambda e: e.ts):
        if spans and e.ts - spans[-1][1] < timedelta(hours=2):
            spans[-1] = (spans[-1][0], e.ts)
        else:
            spans.append((e.ts, e.ts))
    return spans


def _background_times(rng: random.Random, n: int, start: datetime, end: datetime,
                      busy: list[tuple[datetime, datetime]]) -> list[datetime]:
    # an hour away from every session, so no stray search or order changes where a session starts or ends
    span = (end - start).total_seconds()
    out: list[datetime] = []
    while len(out) < n:
        t = start + timedelta(seconds=int(rng.uniform(0, span)))
        if all(not (a - timedelta(hours=1) <= t <= b + timedelta(hours=1)) for a, b in busy):
            out.append(t)
    return out


def _best(pref: CategoryPref, catalog: Catalog, category: str) -> Product:
    return next(p for p in catalog.in_category(category) if pref.utility(p) == 5)


def _user(i: int, seed: int, catalog: Catalog, cfg: LogConfig) -> tuple[UserProfile, list[Event]]:
    rng = random.Random(f"{seed}:user:{i}")
    prefs = {c.key: _prefs_from(rng.choice(catalog.in_category(c.key)), rng) for c in CATEGORIES}
    interests = rng.sample([c.key for c in CATEGORIES], rng.randint(3, 4))
    cat, h, w = interests[0], cfg.history_days, cfg.session_days
    target = _best(prefs[cat], catalog, cat)
    # days of the session window: the real session late enough for an earlier session to fit before it
    real_day = rng.randint(h + min(10, w - 3), h + w - 2)
    t_m = _daytime(rng, real_day)
    events = _real_session(rng, t_m, target, prefs[cat], catalog, cfg.browse)
    free_days = [d for d in range(h, h + w - 1) if d != real_day]
    repeat_start = None
    if rng.random() < cfg.repeat_share:
        other = interests[1]
        day = rng.choice([d for d in free_days if d < real_day])
        free_days.remove(day)
        repeat_start = _daytime(rng, day)
        events += _real_session(rng, repeat_start, _best(prefs[other], catalog, other), prefs[other], catalog,
                                cfg.browse)
    decoys = [(kind, _daytime(rng, day)) for kind, day in
              zip(rng.sample(DECOY_KINDS, rng.randint(1, 2)), rng.sample(free_days, 2))]
    for kind, start in decoys:
        events += _decoy(rng, kind, start, catalog)
    busy = _busy_spans(events)
    end = LOG_START + timedelta(days=h + w)
    weights = [2 if c == cat else 1 for c in interests]
    liked = {c: _liked(prefs[c], catalog, c) for c in interests}
    for t in _background_times(rng, rng.randint(*cfg.background), LOG_START, end, busy):
        if rng.random() < cfg.signal_share:
            c = rng.choices(interests, weights)[0]
            events.append(_signal(rng, t, c, prefs[c], liked[c], catalog.in_category(c)))
        else:
            events.append(_noise(rng, t, catalog))
    # evidence for the session's category somewhere in the 60 days before its search, whatever the draw
    for t in _background_times(rng, 3, t_m - timedelta(days=h - 1), t_m, busy):
        events.append(_signal(rng, t, cat, prefs[cat], liked[cat], catalog.in_category(cat)))
    events.sort(key=lambda e: e.ts)
    return UserProfile(f"u{i:05d}", prefs, interests, cat, target.product_id, t_m, decoys, repeat_start), events


def generate_logs(n_users: int, seed: int, cfg: LogConfig | None = None) -> SyntheticLogs:
    """`n_users` users over a seeded catalogue (ground truth kept in `users`)."""
    cfg = cfg or LogConfig()
    catalog = build_catalog(seed, cfg.per_category)
    out = SyntheticLogs(catalog, {})
    for i in range(n_users):
        user, events = _user(i, seed, catalog, cfg)
        out.users.append(user)
        out.events[user.user_id] = events
    return out
