"""Behaviour logs as perseval reads them: one event per user action, and the product catalogue.

The schema (docs/apeb-log-schema.md) is the same for ingested logs (`logfiles`) and the seeded
generator (`synth_logs`): an action (search, view, like, cart, order) on a target (a product, a video,
a live stream; nothing for a search), at a time, by a user.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from perseval.benchmarks.apeb.catalog import Catalog

ACTIONS = ("search", "view", "like", "cart", "order")
TARGETS = ("product", "video", "live")
# which targets each action may have; a search has none
ACTION_TARGETS: dict[str, tuple[str, ...]] = {
    "search": ("",), "view": TARGETS, "like": TARGETS, "cart": ("product",), "order": ("product",),
}


@dataclass(frozen=True, slots=True)
class Event:
    ts: datetime  # timezone-aware (UTC)
    action: str  # search | view | like | cart | order
    target: str = ""  # product | video | live; "" for a search
    product_id: str = ""  # the product of a product event
    text: str = ""  # a search's query; a video's or live stream's title
    category: str = ""  # a product event: the product's category; a search: the platform's query tag, if any

    @property
    def on_product(self) -> bool:
        return self.target == "product"


@dataclass
class BehaviourLogs:
    catalog: Catalog
    events: dict[str, list[Event]]  # per user, in time order

    @property
    def n_events(self) -> int:
        return sum(len(e) for e in self.events.values())
