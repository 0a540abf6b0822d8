"""How a user's history is fitted to a character budget before a profiler or the responder sees it.

A full history can be far longer than a model's context (Bespoke users have about 96 sessions each); sent
whole, the request fails and the output would be dropped from the means. So every budget has a stated
policy (`history_truncation`), and what it cut is recorded (`HistoryCut`, in the agent's trace):

  share         every session cut to an equal share of the budget (the CPU configs' behaviour: many
                short glimpses; the cut is applied where the text is formatted, `share_budget`)
  oldest_first  whole sessions kept from the newest back while they fit; the older ones are dropped
                (a contiguous recent window, as a context-limited reader of a long history would keep).
                Chat and search sessions are fitted apart, each source to its share of the budget (in
                proportion to its characters), so that neither is dropped whole: the release has no
                timestamps, and the run gives a user's chats first, then their searches, each in the
                order of its table, which is taken as time order. When even a source's newest session
                alone is over its share, that session's beginning is kept.
  error         a history over the budget fails the output with its size in the error (counted as
                failed, never silently dropped)

A session's size is its stripped text; the kept sessions keep the order they were given in.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Sequence

from perseval.core.instances import Document

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
    by_source: dict[str, list[tuple[int, Document]]] = {}
    for i, doc in enumerate(sessions):
        by_source.setdefault(str(doc.meta.get("source", "")), []).append((i, doc))
    kept: dict[int, tuple[Document, int]] = {}  # position in `sessions` -> (the session as shown, its chars)
    for group in by_source.values():
        share = budget * sum(_size(d) for _, d in group) // total
        kept.update(_newest_within(group, share))
    cut.sessions_dropped = len(sessions) - len(kept)
    cut.chars_cut = total - sum(n for _, n in kept.values())
    return [kept[i][0] for i in sorted(kept)], cut


def _newest_within(group: list[tuple[int, Document]], share: int) -> dict[int, tuple[Document, int]]:
    """Whole sessions from the newest back while they fit `share`; when the newest alone does not fit, its
    beginning cut to the share. Position -> (session as shown, characters of it shown)."""
    out: dict[int, tuple[Document, int]] = {}
    used = 0
    for i, doc in reversed(group):
        if used + _size(doc) > share:
            break
        out[i] = doc, _size(doc)
        used += _size(doc)
    if not out and share > 0:
        i, doc = group[-1]
        head = doc.text.strip()[:share].rstrip()
        out[i] = replace(doc, text=head + CUT_MARK), len(head)
    return out


def share_budget(budget: int | None, policy: Truncation) -> int | None:
    """The budget the formatting step applies by sharing it among the sessions: only under `share`."""
    return budget if policy == "share" else None
