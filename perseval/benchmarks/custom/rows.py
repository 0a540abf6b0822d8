"""Field-level checks of a user's own data (docs/custom-data-layout.md), row by row.

An instance row is one of three instance types, told apart by what it scores:
`checkpoints` (free text), `api` + `gold_slots` (an API call) or `candidates` +
`gold_candidate` (a ranking). Each is mapped onto the payload and gold shapes the
IBA checkpoint judge, the IBA slot judge and the APeB ranking judge read, so those
judges run unchanged. The parts the IBA release shares (checkpoints, API slots,
gold slots, history turns) are checked by the same functions (perseval.benchmarks.release_rows).
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from perseval.benchmarks.custom.answers import API, RANKING, TEXT, TYPE_NAMES
from perseval.benchmarks.release_rows import (HistoryRow, Rows, api_of, checkpoints_of, gold_slots_of, history_row,
                                              sub_field)
from perseval.core.instances import Instance

BENCHMARK = "custom"
SCORED: dict[str, tuple[str, ...]] = {TEXT: ("checkpoints",), API: ("api", "gold_slots"),
                                      RANKING: ("candidates", "gold_candidate")}
INSTANCE_FIELDS = ("instance_id", "user_id", "group", "query", *(f for fs in SCORED.values() for f in fs))
TURN_FIELDS = ("user_id", "turn_id", "timestamp", "text", "user", "assistant", "evidence", "scenario")
CANDIDATE_FIELDS = ("id", "title", "price", "brand", "attributes", "category")
MIN_CANDIDATES = 2


def check_fields(r: Rows, obj: dict[str, Any], allowed: Iterable[str], where: str = "") -> None:
    """A field outside the layout is an error (a misspelt optional field would otherwise be lost unseen).
    A null value counts as absent: a Parquet file has every column on every row."""
    allowed = tuple(allowed)
    for key, value in obj.items():
        if key not in allowed and value is not None:
            raise r.fail(f"{where}.{key}" if where else key, f"unknown field; the layout has {list(allowed)}")


def _present(r: Rows, key: str) -> bool:
    return r.raw.get(key) not in (None, "")


def instance_type(r: Rows) -> str:
    """The one instance type whose scored fields the row has."""
    found = [t for t, fields in SCORED.items() if any(_present(r, f) for f in fields)]
    if not found:
        raise r.fail("checkpoints", "the row scores nothing; give `checkpoints` (free text), `api` + `gold_slots` "
                                    "(an API call) or `candidates` + `gold_candidate` (a ranking)")
    if len(found) > 1:
        first, second = (SCORED[t][0] for t in found[:2])
        raise r.fail(second, f"a row is one instance type: it has both `{first}` ({TYPE_NAMES[found[0]]}) and "
                             f"`{second}` ({TYPE_NAMES[found[1]]})")
    return found[0]


def _price(r: Rows, card: dict[str, Any], where: str) -> float:
    value = card.get("price")
    if value is None or value == "":
        raise r.fail(f"{where}.price", "missing; expected a number of 0 or more")
    try:
        price = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise r.fail(f"{where}.price", f"{value!r:.40} is not a number of 0 or more")
    return price


def _candidate(r: Rows, card: dict[str, Any], where: str) -> dict[str, Any]:
    """A candidate as the APeB ranking prompt shows it: id, title, brand, price, attributes."""
    check_fields(r, card, CANDIDATE_FIELDS, where)
    out = {"id": sub_field(r, card, where, "id", required=True),
           "title": sub_field(r, card, where, "title", required=True),
           "brand": sub_field(r, card, where, "brand") or "", "price": _price(r, card, where),
           "attributes": [str(a) for a in sub_field(r, card, where, "attributes", list) or []]}
    category = sub_field(r, card, where, "category")
    return {**out, "category": category} if category else out


def _candidates(r: Rows) -> list[dict[str, Any]]:
    cards: list[dict[str, Any]] = []
    first: dict[str, int] = {}
    for i, raw in enumerate(r.items("candidates")):
        card = _candidate(r, raw, f"candidates[{i}]")
        if card["id"] in first:
            raise r.fail(f"candidates[{i}].id", f"duplicate candidate id {card['id']!r} (first at "
                                                f"candidates[{first[card['id']]}])")
        first[card["id"]] = i
        cards.append(card)
    if len(cards) < MIN_CANDIDATES:
        raise r.fail("candidates", f"{len(cards)} candidate; a ranking needs at least {MIN_CANDIDATES}")
    return cards


def _gold_candidate(r: Rows, cards: list[dict[str, Any]]) -> str:
    gold = r.need("gold_candidate")
    ids = [c["id"] for c in cards]
    if gold not in ids:
        raise r.fail("gold_candidate", f"{gold!r} is not among the instance's candidates {ids}")
    return gold


def instance_row(r: Rows) -> Instance:
    """The row as an Instance whose payload and gold have the shapes the reused judges read."""
    check_fields(r, r.raw, INSTANCE_FIELDS)
    kind = instance_type(r)
    payload: dict[str, Any] = {"action_type": kind}
    if kind == TEXT:
        gold: dict[str, Any] = {"checkpoints": checkpoints_of(r)}
    elif kind == API:
        payload["api"] = api_of(r)
        gold = {"slots": gold_slots_of(r, payload["api"])}
    else:
        payload["candidates"] = _candidates(r)
        gold = {"purchased": _gold_candidate(r, payload["candidates"])}  # the APeB ranking judge's name for it
    return Instance(r.need("instance_id"), BENCHMARK, r.need("user_id"), r.need("group"), r.need("query"),
                    payload, gold)


def turn_row(r: Rows, index_in_user: int) -> HistoryRow:
    """A history turn, checked and mapped as an IBA release turn is, after the field-name check."""
    check_fields(r, r.raw, TURN_FIELDS)
    return history_row(r, index_in_user)
