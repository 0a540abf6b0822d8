"""The salience score of Deep Retrieval's re-ranker (paper section 4, Table 12), from a model's labels.

Table 12 lists what each preference signal adds to a passage's 0..10 score
(explicit revision 3-4, complaint or strong affect 3-4, direct statement 2,
implicit behaviour 1) and keeps passages scoring at least 5; the paper weighs
explicit feedback above noisy implicit cues. Read as the whole score, those
contributions would drop a passage in which the user plainly states the
preference (2 < 5). We read the score as task relevance plus the signals: a
passage that bears on what this task must decide starts at TASK_RELEVANCE, an
unrelated one scores 0 whatever it says. 3 is the smallest start at which a
direct statement passes (3 + 2) while a lone implicit cue does not (3 + 1),
so weak cues are not over-read unless another signal backs them.

The model only labels a passage (relevant or not, which signals it carries);
the arithmetic is ours, so a small model's sums cannot sink a passage and any
model's labels are scored alike. The signals are the five evidence kinds of the
release layout, weighed at the low end of their Table 12 range, one contribution
per Table 12 category (a correction that is also a rejection is one revision).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from perseval.benchmarks.evidence_kinds import SALIENCE_CAP, TABLE12
from perseval.core.parsing import extract_json

SIGNALS = tuple(TABLE12)  # correction, rejection, complaint, statement, behaviour
TASK_RELEVANCE = 3
_ALIASES = {"behavior": "behaviour", "revision": "correction", "habit": "behaviour", "preference": "statement"}
_RELEVANT = re.compile(r'"relevant"\s*:\s*"?(true|false|yes|no)', re.IGNORECASE)
_SIGNAL_WORD = re.compile(r"[a-z]+")
_FIRST_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Rating:
    """One passage's labels and the score they add up to; `labels` false: a bare number was read instead."""

    score: int
    relevant: bool | None = None
    signals: tuple[str, ...] = field(default_factory=tuple)
    labels: bool = True

    def trace(self) -> dict[str, Any]:
        return {"relevant": self.relevant, "signals": list(self.signals)} if self.labels else {"bare_score": True}


def score(relevant: bool, signals: Iterable[str]) -> int:
    """Table 12's arithmetic: 0 when unrelated, else the relevance start plus one weight per signal category."""
    if not relevant:
        return 0
    by_category: dict[str, int] = {}
    for kind in signals:
        category, low, _ = TABLE12[kind]
        by_category[category] = max(by_category.get(category, 0), low)
    return min(SALIENCE_CAP, TASK_RELEVANCE + sum(by_category.values()))


def _signal(word: Any) -> str | None:
    w = str(word).strip().lower()
    w = _ALIASES.get(w, w)
    return w if w in TABLE12 else None


def _signals(raw: Any) -> tuple[str, ...]:
    words = raw if isinstance(raw, list) else _SIGNAL_WORD.findall(str(raw or "").lower())
    return tuple(dict.fromkeys(s for s in map(_signal, words) if s))


def _relevant(raw: Any) -> bool | None:
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower()
    return True if word in ("true", "yes") else False if word in ("false", "no") else None


def _rating(relevant: bool, signals: tuple[str, ...]) -> Rating:
    return Rating(score(relevant, signals), relevant, signals)


def parse_rating(text: str) -> Rating | None:
    """The labels from JSON {"relevant": ..., "signals": [...]}, or from a reply cut short; a bare
    0..10 number ({"score": n} or the first integer) is taken as the score itself; None if neither."""
    value = extract_json(text)
    if isinstance(value, dict) and "relevant" in value:
        relevant = _relevant(value["relevant"])
        if relevant is not None:
            return _rating(relevant, _signals(value.get("signals")))
    match = _RELEVANT.search(text or "")
    if match:  # a reply cut off by max_tokens: the relevance and the signals named so far
        tail = text[match.end():]
        return _rating(_relevant(match.group(1)) is True, _signals(tail.split("signals", 1)[-1]))
    if isinstance(value, dict) and "score" in value:
        value = value["score"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Rating(max(0, min(SALIENCE_CAP, int(round(value)))), labels=False)
    number = None if isinstance(value, (dict, list)) else _FIRST_INT.search(text or "")
    return Rating(max(0, min(SALIENCE_CAP, int(number.group()))), labels=False) if number else None
