"""Bespoke prompts: the two judges' prompts and the extraction of their answers, and the responder's prompt.

The recall judge's prompt (section 3.4, C.1: one gold claim at a time, is it
stated in the response?) and the reading of E_p's JSON answer (E_p's prompt
and variants are in `evaluation.py`). Both ask for the verdict or score
*before* the explanation, so an answer cut short by max_tokens still carries
the part that is scored. The response under judgment is quoted as data
inside tags (perseval.judges.quoting), and a score is read only from the
judge's own answer.
"""
from __future__ import annotations

from typing import Any, Sequence

from perseval.benchmarks.bespoke.layout import CRITERIA, SCORE_MAX, SCORE_MIN
from perseval.benchmarks.bespoke.loader import rating_score
from perseval.judges.binary import REASON, REASON_CHARS
from perseval.judges.quoting import data_rule, quote
from perseval.core.parsing import judge_object


def criteria_schema(feedback_chars: int | None = REASON_CHARS) -> dict[str, Any]:
    """E_p's JSON answer: per criterion a score 1..5 and feedback of at most `feedback_chars` characters
    (None: no limit, as the official evaluator, whose feedback mirrors the length of the examples')."""
    feedback = REASON if feedback_chars == REASON_CHARS else \
        {"type": "string", **({"maxLength": feedback_chars} if feedback_chars is not None else {})}
    rating = {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": SCORE_MIN, "maximum": SCORE_MAX},
                       "feedback": feedback},
        "required": ["score", "feedback"],
    }
    return {"type": "object", "properties": {name: rating for name in CRITERIA}, "required": list(CRITERIA)}


CRITERIA_SCHEMA: dict[str, Any] = criteria_schema()


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked when cut (keeps prompts inside small context windows)."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " [...]"


def claim_messages(claim: str, response: str, response_chars: int | None = None) -> list[dict[str, str]]:
    """Messages asking whether `response` conveys `claim` (the whole response unless `response_chars`)."""
    user = (
        f"Fact: {claim}\n\n"
        f"{quote('response', response if response_chars is None else clip(response, response_chars))}\n\n"
        "Does the response state this fact? Count it if the meaning is the same in other words; "
        "do not count it if it is missing or contradicted.\n"
        'Reply with JSON only: {"verdict": true or false, "reason": "<one short sentence>"}'
    )
    return [{"role": "system", "content": "You check whether a response states a given fact. " + data_rule("response")},
            {"role": "user", "content": user}]


def parse_criteria(text: str, quoted: Sequence[str] = ()) -> dict[str, tuple[int | None, str]]:
    """Per criterion (score 1..5 or None when missing/out of range/unparseable, feedback), from the judge's
    own answer (perseval.core.parsing.judge_object: cut-off answers keep the criteria they completed; an object
    that also appears in the `quoted` response is never read).

    Accepts {"tone": {"score": 4, "feedback": ...}}, the flat {"tone_score": 4,
    "tone_feedback": ...} of the official evaluator's output, and {"tone": 4}.
    """
    obj = judge_object(text, structured=True, quoted=quoted) or {}
    out: dict[str, tuple[int | None, str]] = {}
    for name in CRITERIA:
        value = obj.get(name)
        if isinstance(value, dict):
            out[name] = rating_score(value.get("score")), str(value.get("feedback", ""))
        elif f"{name}_score" in obj:
            out[name] = rating_score(obj[f"{name}_score"]), str(obj.get(f"{name}_feedback", ""))
        else:
            out[name] = rating_score(value), ""
    return out
