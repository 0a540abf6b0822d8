"""PrefEval's error types from the four checks of one response (the paper's generation evaluation).

  acknowledges   the response mentions or assumes some preference of the user's
  hallucinates   (only when it acknowledges) the preference it states is not the user's
  violates       it recommends against the user's preference without saying why
  helpful        it answers the question
Each response then has at most one error type, and follows the preference when it has none:
  unhelpful                 not helpful
  inconsistent violation    acknowledges the real preference, then violates it anyway
  hallucination violation   acknowledges a preference that is not the user's, and violates the real one
  unaware violation         violates without acknowledging any preference
A check the judge could not answer leaves the response unscored (None), never a pass or a fail.
"""
from __future__ import annotations

from dataclasses import dataclass

CHECKS = ("acknowledges", "hallucinates", "violates", "helpful")
ERROR_TYPES = ("unhelpful", "inconsistent_violation", "hallucination_violation", "unaware_violation")


@dataclass(frozen=True)
class Verdicts:
    acknowledges: bool | None
    hallucinates: bool | None  # asked only when the response acknowledges; None otherwise is fine
    violates: bool | None
    helpful: bool | None


def classify(v: Verdicts) -> dict[str, bool] | None:
    """Error type flags and `follows` (no error at all); None when a needed check is unanswered."""
    if v.acknowledges is None or v.violates is None or v.helpful is None or (v.acknowledges and v.hallucinates is None):
        return None
    hallucinated = bool(v.acknowledges and v.hallucinates)
    unhelpful = not v.helpful
    flags = {
        "unhelpful": unhelpful,
        "inconsistent_violation": v.acknowledges and not hallucinated and v.violates and not unhelpful,
        "hallucination_violation": v.acknowledges and hallucinated and v.violates and not unhelpful,
        "unaware_violation": not v.acknowledges and v.violates and not unhelpful,
    }
    return {**flags, "follows": not any(flags.values()), "acknowledges": bool(v.acknowledges),
            "hallucinates": hallucinated, "violates": bool(v.violates)}
