"""Seeded personas p = (B, T, E, R).

Background B and traits T are long-term; transient state E and role R are
short-term, and construction uses them to motivate a dynamic preference
("now that I'm ..."), which is why a later preference may contradict an
earlier one.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

SEED_PERSONAS = 400  # the paper builds its users from 400 seed personas

BACKGROUNDS = (
    "a 29-year-old nurse in Manchester",
    "a 41-year-old civil engineer in Lyon",
    "a 35-year-old chemistry teacher in Austin",
    "a 24-year-old graduate student in Toronto",
    "a 52-year-old accountant in Melbourne",
    "a 33-year-old UX designer in Berlin",
    "a 46-year-old bakery owner in Porto",
    "a 38-year-old data analyst in Singapore",
    "a 27-year-old paramedic in Dublin",
    "a 60-year-old retired librarian in Edinburgh",
    "a 31-year-old software tester in Bangalore",
    "a 44-year-old architect in Montreal",
    "a 22-year-old barista and art student in Seoul",
    "a 57-year-old pharmacist in Cape Town",
    "a 36-year-old journalist in Buenos Aires",
    "a 49-year-old logistics manager in Rotterdam",
    "a 26-year-old junior lawyer in Nairobi",
    "a 40-year-old physiotherapist in Stockholm",
)
TRAITS = (
    "meticulous", "impatient", "curious", "frugal", "sociable",
    "reserved", "organised", "spontaneous", "perfectionist", "easy-going",
)
STATES = (
    "under heavy deadline pressure",
    "recovering from a bad cold",
    "on a tight budget this month",
    "sleeping badly lately",
    "just back from a long holiday",
    "in the middle of a house move",
)
ROLES = (
    "a newly promoted team lead",
    "a first-time parent",
    "a part-time freelancer",
    "this year's conference organiser",
    "a mentor for two interns",
    "a volunteer football coach",
)


def persona_cluster(persona_id: str) -> str:
    """The cluster an IBA instance's interval counts by: its persona, the user that repeats."""
    return f"iba-{persona_id}"


@dataclass(frozen=True)
class Persona:
    persona_id: str
    background: str  # B, long-term
    traits: tuple[str, ...]  # T, long-term
    state: str  # E, short-term
    role: str  # R, short-term

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "traits": list(self.traits)}


def _draw(rng: random.Random) -> Persona:
    """One persona; its id names the combination so equal personas share an id."""
    b, e, r = rng.randrange(len(BACKGROUNDS)), rng.randrange(len(STATES)), rng.randrange(len(ROLES))
    t = sorted(rng.sample(range(len(TRAITS)), 2))
    return Persona(f"p-{b}-{t[0]}-{t[1]}-{e}-{r}", BACKGROUNDS[b], tuple(TRAITS[i] for i in t), STATES[e], ROLES[r])


@lru_cache(maxsize=1)
def persona_pool() -> tuple[Persona, ...]:
    """The seed personas: distinct, and the same on every machine (drawn with a constant seed)."""
    rng = random.Random("iba-seed-personas")
    pool: dict[str, Persona] = {}
    while len(pool) < SEED_PERSONAS:
        p = _draw(rng)
        pool.setdefault(p.persona_id, p)
    return tuple(pool.values())


def sample_persona(rng: random.Random) -> Persona:
    """A seed persona; several users may share one, as in the paper (400 personas, 6,962 instances)."""
    return persona_pool()[rng.randrange(SEED_PERSONAS)]


def transition_phrase(persona: Persona, rng: random.Random) -> str:
    """Why a preference changed: the short-term part of the persona (E or R)."""
    if rng.random() < 0.5:
        return f"Things are different now that I'm {persona.role}."
    return f"I'm {persona.state}, so my needs have changed."
