"""Candidate sets (paper, 2.2.3): hard = what the user considered in the session plus the purchase; random =
the purchase plus products drawn from the whole catalogue. Both shuffled with a seed per user.

The hard set is the paper's as is by default. Two opt-in changes are named in the set's label, so a
table never mixes them up with the paper's set: `pad_to` fills a small hard set with other products of
the purchase's category ("hard+pad10"), `max_size` caps a large one at the purchase plus a seeded sample
of the rest ("hard<=20").
"""
from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, model_validator

from perseval.benchmarks.apeb.catalog import Catalog
from perseval.benchmarks.apeb.sessions import Session
from perseval.kernel.params import Params

CandidateSet = Literal["hard", "random"]


class CandidateConfig(Params):
    pad_to: int | None = Field(None, ge=2)  # hard: fill up to this size with same-category products (off)
    max_size: int | None = Field(None, ge=2)  # hard: cap at this size (off)
    random_size: int | Literal["match"] = "match"  # random: a fixed size, or the size of the user's hard set

    @model_validator(mode="after")
    def _sizes(self) -> "CandidateConfig":
        if self.pad_to and self.max_size and self.pad_to > self.max_size:
            raise ValueError("pad_to is larger than max_size")
        if isinstance(self.random_size, int) and self.random_size < 2:
            raise ValueError("random_size must be at least 2 (the purchase and one other product)")
        return self

    def label(self, kind: CandidateSet) -> str:
        """The set's name in tables: 'hard', 'random', or 'hard' with its opt-in changes spelled out."""
        if kind == "random":
            return "random" if self.random_size == "match" else f"random{self.random_size}"
        return "hard" + (f"+pad{self.pad_to}" if self.pad_to else "") + (f"<={self.max_size}" if self.max_size else "")


def hard_candidates(session: Session, catalog: Catalog, seed: int, cfg: CandidateConfig | None = None) -> list[str]:
    cfg = cfg or CandidateConfig()
    rng = random.Random(f"{seed}:hard:{session.user_id}")
    ids = list(dict.fromkeys([*session.considered, session.purchased]))
    if cfg.max_size and len(ids) > cfg.max_size:
        others = [i for i in ids if i != session.purchased]
        ids = [session.purchased, *rng.sample(others, cfg.max_size - 1)]
    if cfg.pad_to and len(ids) < cfg.pad_to:
        taken = set(ids)
        pool = [p.product_id for p in catalog.in_category(session.category) if p.product_id not in taken]
        ids += rng.sample(pool, min(len(pool), cfg.pad_to - len(ids)))
    rng.shuffle(ids)
    return ids


def random_candidates(session: Session, catalog: Catalog, seed: int, size: int) -> list[str]:
    """The purchase plus `size - 1` other products drawn from the whole catalogue."""
    rng = random.Random(f"{seed}:random:{session.user_id}")
    n = min(size - 1, len(catalog.products) - 1)
    # draw indexes, not a copied pool: a real catalogue has millions of products
    picked: list[str] = []
    while len(picked) < n:
        pid = catalog.products[rng.randrange(len(catalog.products))].product_id
        if pid != session.purchased and pid not in picked:
            picked.append(pid)
    ids = [session.purchased, *picked]
    rng.shuffle(ids)
    return ids


def candidate_set(kind: CandidateSet, session: Session, catalog: Catalog, seed: int,
                  cfg: CandidateConfig) -> list[str]:
    hard = hard_candidates(session, catalog, seed, cfg)
    if kind == "hard":
        return hard
    return random_candidates(session, catalog, seed, len(hard) if cfg.random_size == "match" else cfg.random_size)
