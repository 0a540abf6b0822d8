"""How a user's history is fitted to a character budget before a profiler or the responder sees it.

A full history can be far longer than a model's context (Bespoke users have about 96 sessions each); sent
whole, the request fails and the output would be dropped from the means. So every budget has a stated
policy (`history_truncation`), and what it cut is recorded (`HistoryCut`, in the agent's trace):

  share         every session cut to an equal share of the budget (the CPU configs' behaviour: many
                short glimpses; the cut is applied where the text is formatted, `share_budget`)
  oldest_first  whole sessions kept from the newest back while they fit; the older ones are dropped
                (a contiguous recent window, as a context-limited reader of a long history would keep).
                When even the newest session alone is over the budget, its beginning is kept.
  error         a history over the budget fails the output with its size in the error (counted as
                failed, never silently dropped)

Sessions are in time order (oldest first), as the run gives them; a session's size is its stripped text.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Sequence

from perseval.records import Document

Truncation = Literal["share", "oldest_first", "error"]
CUT_MARK = " [...]"


class HistoryOverBudget(Exception):
    """The history does not fit its budget and the policy is `error`."""


@dataclass
class HistoryCut:
    """What fitting a history to its budget removed (all zero: it fitted whole)."""

    policy: str
    budget: int | None
    sessions: int  # sessions given
    sessions_dropped: int = 0
    chars: int = 0  # characters of the history given
    chars_cut: int = 0  # characters removed (dropped sessions, and clipped text)

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _size(doc: Document) -> int:
    return len(doc.text.strip())


def fit_history(sessions: Sequence[Document], budget: int | None,
                policy: Truncation) -> tuple[list[Document], HistoryCut]:
    """The sessions to show under `budget` characters (None: all of them) and what was cut.

    For `share` the sessions come back whole and the caller cuts each to its share (`share_budget`),
    adding the characters it cut to the record."""
    total = sum(_size(d) for d in sessions)
    cut = HistoryCut(policy, budget, len(sessions), chars=total)
    if budget is None or total <= budget or policy == "share":
        return list(sessions), cut
    if policy == "error":
        raise HistoryOverBudget(f"the history has {total} characters in {len(sessions)} sessions, over its budget "
                                f"of {budget} (history_truncation: error; oldest_first keeps the newest sessions)")
    kept: list[Document] = []
    used = 0
    for doc in reversed(sessions):  # newest first
        if used + _size(doc) > budget:
            break
        kept.append(doc)
        used += _size(doc)
    if not kept:  # the newest session alone is over the budget: keep its beginning
        newest = sessions[-1]
        kept, used = [replace(newest, text=newest.text.strip()[:budget].rstrip() + CUT_MARK)], budget
    kept.reverse()
    cut.sessions_dropped = len(sessions) - len(kept)
    cut.chars_cut = total - min(used, total)
    return kept, cut


def share_budget(budget: int | None, policy: Truncation) -> int | None:
    """The budget the formatting step applies by sharing it among the sessions: only under `share`."""
    return budget if policy == "share" else None
