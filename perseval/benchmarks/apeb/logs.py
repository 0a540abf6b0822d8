"""Seeded behaviour logs: users with latent long-term preferences and their event streams.

The log spans `history_days + session_days` days (60 + 30 by default, as in
the paper: sessions are taken from a 30-day window and carry up to 60 days of
history), so some events fall outside a session's history window and the
miner's 60-day cut is exercised.

Event kinds: view, purchase (a buy outside search: feed, video or live
stream), video, live, search, order (the checkout that can end a search).
Each user gets one non-trivial search-to-order session whose order is the
product that best fits the user's latent preference, plus decoy sessions
that the miner must filter out, plus preference signals and unrelated noise.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from perseval.benchmarks.apeb.catalog import CATEGORIES, CATEGORY_BY_KEY, Catalog, CategorySpec, Product, build_catalog

LOG_START = datetime(2025, 1, 1, tzinfo=timezone.utc)
DECOY_KINDS = ("no_reformulation", "order_outside_delta", "few_browsed", "intent_mismatch")

NOISE_VIDEOS = (
    "Cat tries to catch a laser pointer", "Street food tour in Bangkok", "Top 10 football goals this week",
    "How to fold a fitted sheet", "Lo-fi beats to relax", "Travel vlog: three days in Lisbon",
    "Funny dog compilation", "Speedrun of a retro platformer", "Morning routine of a night-shift nurse",
    "Learn five guitar chords", "Baking sourdough for beginners", "Unboxing a vintage camera",
)
NOISE_LIVES = (
    "Late-night gaming marathon", "Live concert: indie band", "Q&A with a travel blogger",
    "Cooking live: noodles from scratch", "Chess blitz tournament", "Live painting session",
)
BAND_WORDS = {"budget": "cheap", "mid-range": "", "premium": "premium"}


@dataclass(frozen=True)
class Event:
    ts: datetime
    kind: str  # view | purchase | video | live | search | order
    product_id: str = ""
    text: str = ""  # query text, or video / stream title
    category: str = ""  # product category; for a search, the platform's query-category tag


@dataclass(frozen=True)
class CategoryPref:
    brands: tuple[str, str]  # favourite first
    band: str
    attributes: tuple[str, ...]

    def utility(self, p: Product) -> int:
        brand = 2 if p.brand == self.brands[0] else int(p.brand == self.brands[1])
        return brand + int(p.band == self.band) + len(set(p.attributes) & set(self.attributes))


@dataclass
class UserProfile:
    user_id: str
    prefs: dict[str, CategoryPref]
    interests: list[str]  # categories the user's history shows preference evidence for
    session_category: str
    target: str  # the product the real session ends with (ground truth for tests)
    decoys: list[str] = field(default_factory=list)


@dataclass
class BehaviourLogs:
    catalog: Catalog
    users: list[UserProfile]
    events: dict[str, list[Event]]  # per user, in time order


@dataclass(frozen=True)
class LogConfig:
    history_days: int = 60
    session_days: int = 30
    per_category: int = 15
    background: tuple[int, int] = (50, 90)  # events per user outside sessions
    signal_share: float = 0.3  # share of background events that carry preference evidence


def _prefs_from(prototype: Product, catalog: Catalog, rng: random.Random) -> CategoryPref:
    # The prototype is the unique best product: its brand first, its band, its attributes.
    spec = CATEGORY_BY_KEY[prototype.category]
    second = rng.choice([b for b in spec.brands if b != prototype.brand])
    return CategoryPref((prototype.brand, second), prototype.band, prototype.attributes)


def _signal(rng: random.Random, when: datetime, cat: str, pref: CategoryPref, catalog: Catalog) -> Event:
    spec = CATEGORY_BY_KEY[cat]
    liked = [p for p in catalog.in_category(cat) if pref.utility(p) >= 3] or catalog.in_category(cat)
    p = rng.choice(liked)
    attr = rng.choice(pref.attributes).replace("-", " ")
    kind = rng.choice(("view", "view", "purchase", "video", "live", "search"))
    if kind in ("view", "purchase"):
        return Event(when, kind, p.product_id, category=cat)
    if kind == "video":
        return Event(when, "video", text=f"Review: {pref.brands[0]} {attr} {spec.noun}", category=cat)
    if kind == "live":
        return Event(when, "live", text=f"{rng.choice(pref.brands)} live sale: {spec.noun}", category=cat)
    return Event(when, "search", text=f"{pref.brands[0].lower()} {spec.noun}", category=cat)


def _noise(rng: random.Random, when: datetime, catalog: Catalog) -> Event:
    kind = rng.choice(("video", "video", "live", "view", "search"))
    if kind == "video":
        return Event(when, "video", text=rng.choice(NOISE_VIDEOS))
    if kind == "live":
        return Event(when, "live", text=rng.choice(NOISE_LIVES))
    p = rng.choice(catalog.products)
    if kind == "view":
        return Event(when, "view", p.product_id, category=p.category)
    return Event(when, "search", text=CATEGORY_BY_KEY[p.category].noun, category=p.category)


def _clock(rng: random.Random, start: datetime):
    """Successive timestamps 30 s to 2 min apart: a session of <= 14 steps stays under 30 minutes."""
    t = start
    while True:
        yield t
        t += timedelta(seconds=rng.randint(30, 120))


def _queries(rng: random.Random, spec: CategorySpec, pref: CategoryPref) -> list[str]:
    a1, a2 = (a.replace("-", " ") for a in pref.attributes)
    refined = " ".join(w for w in (BAND_WORDS[pref.band], a1, a2, spec.noun) if w)
    middle = rng.choice((spec.noun, f"{a1} {spec.noun}"))
    return [rng.choice(spec.vague), *([middle] if rng.random() < 0.6 else []), refined]


def _real_session(rng: random.Random, start: datetime, target: Product, pref: CategoryPref,
                  catalog: Catalog) -> list[Event]:
    spec = CATEGORY_BY_KEY[target.category]
    others = [p for p in catalog.in_category(target.category) if p.product_id != target.product_id]
    browsed = rng.sample(others, rng.randint(4, 7))
    queries = _queries(rng, spec, pref)
    # Spread the competing products between the searches; the purchase is viewed last.
    chunks = [browsed[i::len(queries)] for i in range(len(queries))]
    clock = _clock(rng, start)
    events: list[Event] = []
    for query, chunk in zip(queries, chunks):
        events.append(Event(next(clock), "search", text=query, category=spec.key))
        events += [Event(next(clock), "view", p.product_id, category=p.category) for p in chunk]
    events.append(Event(next(clock), "view", target.product_id, category=target.category))
    events.append(Event(next(clock), "order", target.product_id, category=target.category))
    return events


def _decoy(rng: random.Random, kind: str, start: datetime, catalog: Catalog) -> list[Event]:
    spec = rng.choice(CATEGORIES)
    items = rng.sample(catalog.in_category(spec.key), 5)
    clock = _clock(rng, start)
    q1, q2 = rng.choice(spec.vague), spec.noun
    searches = [q1] if kind == "no_reformulation" else [q1, q2]
    viewed = items[:1] if kind == "few_browsed" else items[:4]
    events = [Event(next(clock), "search", text=q, category=spec.key) for q in searches]
    events += [Event(next(clock), "view", p.product_id, category=p.category) for p in viewed]
    bought = items[0]
    if kind == "intent_mismatch":
        bought = rng.choice([p for p in catalog.products if p.category != spec.key])
    when = next(clock)
    if kind == "order_outside_delta":
        when = start + timedelta(minutes=rng.randint(40, 90))
    return events + [Event(when, "order", bought.product_id, category=bought.category)]


def _background_times(rng: random.Random, n: int, end: datetime, busy: list[tuple[datetime, datetime]]):
    # Keep background events an hour away from every session, so no stray search or
    # order changes where a session starts or ends.
    span = (end - LOG_START).total_seconds()
    out: list[datetime] = []
    while len(out) < n:
        t = LOG_START + timedelta(seconds=int(rng.uniform(0, span)))
        if all(not (a - timedelta(hours=1) <= t <= b + timedelta(hours=1)) for a, b in busy):
            out.append(t)
    return out


def _user(i: int, seed: int, catalog: Catalog, cfg: LogConfig) -> tuple[UserProfile, list[Event]]:
    rng = random.Random(f"{seed}:user:{i}")
    prefs = {c.key: _prefs_from(rng.choice(catalog.in_category(c.key)), catalog, rng) for c in CATEGORIES}
    interests = rng.sample([c.key for c in CATEGORIES], rng.randint(3, 4))
    cat = interests[0]
    pref = prefs[cat]
    target = next(p for p in catalog.in_category(cat) if pref.utility(p) == 5)
    day = timedelta(days=1)
    t_m = _daytime(rng, cfg.history_days + rng.randint(2, cfg.session_days - 3))
    events = _real_session(rng, t_m, target, pref, catalog)
    decoys = rng.sample(DECOY_KINDS, rng.randint(1, 2))
    # Decoys go on distinct days of the history period, so they never overlap each other.
    for kind, d in zip(decoys, rng.sample(range(3, cfg.history_days - 3), len(decoys))):
        events += _decoy(rng, kind, _daytime(rng, d), catalog)
    busy = _busy_spans(events)
    end = LOG_START + (cfg.history_days + cfg.session_days) * day
    weights = [2 if c == cat else 1 for c in interests]
    for t in _background_times(rng, rng.randint(*cfg.background), end, busy):
        if rng.random() < cfg.signal_share:
            c = rng.choices(interests, weights)[0]
            events.append(_signal(rng, t, c, prefs[c], catalog))
        else:
            events.append(_noise(rng, t, catalog))
    # Guarantee evidence for the session category somewhere in the 60 days before the session.
    for t in _background_times(rng, 3, t_m, busy + [(LOG_START, t_m - (cfg.history_days - 1) * day)]):
        events.append(_signal(rng, t, cat, pref, catalog))
    events.sort(key=lambda e: e.ts)
    user = UserProfile(f"u{i:04d}", prefs, interests, cat, target.product_id, decoys)
    return user, events


def _daytime(rng: random.Random, day: int) -> datetime:
    """A time between 08:00 and 20:00 on day `day` of the log."""
    return LOG_START + timedelta(days=day, minutes=rng.randint(8 * 60, 20 * 60))


def _busy_spans(events: list[Event]) -> list[tuple[datetime, datetime]]:
    """(first, last) timestamp of each contiguous session block (events less than 2 h apart)."""
    spans: list[tuple[datetime, datetime]] = []
    for e in sorted(events, key=lambda e: e.ts):
        if spans and e.ts - spans[-1][1] < timedelta(hours=2):
            spans[-1] = (spans[-1][0], e.ts)
        else:
            spans.append((e.ts, e.ts))
    return spans


def generate_logs(n_users: int, seed: int, cfg: LogConfig | None = None) -> BehaviourLogs:
    """`n_users` users; user i depends only on (seed, i), so a larger sample extends a smaller one."""
    cfg = cfg or LogConfig()
    catalog = build_catalog(seed, cfg.per_category)
    users, events = [], {}
    for i in range(n_users):
        user, evs = _user(i, seed, catalog, cfg)
        users.append(user)
        events[user.user_id] = evs
    return BehaviourLogs(catalog, users, events)
