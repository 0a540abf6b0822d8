"""Bespoke prompts: the two judges' prompts and the extraction of their answers, and the responder's prompt.

Two judges, after section 3.4 and appendix C.1 of the paper: a recall judge
that decides, one gold claim at a time, whether the response states it; and
the personalization judge E_p, which rates the response on four criteria
given the user's rubric, their rated example responses and their gold need.
Both ask for JSON with the verdict or score *before* the explanation, so an
answer cut short by max_tokens still carries the part that is scored. The
response under judgment (and the example responses) are quoted as data inside
tags, and a score is read only from the judge's own answer.
"""
from __future__ import annotations

from typing import Any, Sequence

from perseval.benchmarks.bespoke.layout import CRITERIA, RESPONSE_TEXT_KEY, SCORE_MAX, SCORE_MIN
from perseval.benchmarks.bespoke.loader import rating_score
from perseval.judges.binary import REASON
from perseval.judges.quoting import data_rule, quote
from perseval.parsing import judge_object
from perseval.records import Document, Passage


_RATING = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": SCORE_MIN, "maximum": SCORE_MAX},
                   "feedback": REASON},
    "required": ["score", "feedback"],
}
CRITERIA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {name: _RATING for name in CRITERIA},
    "required": list(CRITERIA),
}

_CRITERIA_HELP = (
    "need_alignment: does it answer what this person actually wanted, without detours?\n"
    "content_depth: is the level of detail right for them?\n"
    "tone: does the voice match the tone they like?\n"
    "explanation_style: is it laid out the way they like to read (steps, examples, bullets...)?"
)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked when cut (keeps prompts inside small context windows)."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " [...]"


def claim_messages(claim: str, response: str, response_chars: int) -> list[dict[str, str]]:
    """Messages asking whether `response` conveys `claim`."""
    user = (
        f"Fact: {claim}\n\n{quote('response', clip(response, response_chars))}\n\n"
        "Does the response state this fact? Count it if the meaning is the same in other words; "
        "do not count it if it is missing or contradicted.\n"
        'Reply with JSON only: {"verdict": true or false, "reason": "<one short sentence>"}'
    )
    return [{"role": "system", "content": "You check whether a response states a given fact. " + data_rule("response")},
            {"role": "user", "content": user}]


def criteria_messages(query: str, need: str, rubric: str, shots: list[dict[str, Any]], response: str,
                      limits: dict[str, int]) -> list[dict[str, str]]:
    """Messages for E_p. `limits`: rubric_chars, shot_chars, max_shots, response_chars."""
    examples = "\n\n".join(
        _example(k, shot, limits["shot_chars"]) for k, shot in enumerate(shots[: limits["max_shots"]], start=1)
    )
    user = (
        f"Question this person asked: {query}\n"
        f"What they actually wanted: {need}\n\n"
        f"Their rubric (1 = worst, 5 = best):\n{clip(rubric, limits['rubric_chars'])}\n\n"
        f"How they rated earlier answers to this question:\n{examples}\n\n"
        f"Answer to rate:\n{quote('response', clip(response, limits['response_chars']))}\n\n"
        f"Criteria:\n{_CRITERIA_HELP}\n\n"
        "Score each criterion as this person would, with an integer from 1 to 5 and one sentence of "
        "feedback in their voice. Reply with JSON only, in this form:\n"
        '{"need_alignment": {"score": 3, "feedback": "..."}, "content_depth": {"score": 3, "feedback": "..."}, '
        '"tone": {"score": 3, "feedback": "..."}, "explanation_style": {"score": 3, "feedback": "..."}}'
    )
    system = ("You rate answers on behalf of one particular person. Their rubric and their own past ratings "
              "show what they value and how strict they are; rate the new answer the way they would. "
              + data_rule("response", "example"))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _example(k: int, shot: dict[str, Any], limit: int) -> str:
    lines = [f"[Example {k}]", quote("example", clip(str(shot.get(RESPONSE_TEXT_KEY, '')), limit))]
    for name in CRITERIA:
        rating = shot.get(name) or {}
        lines.append(f"{name}: {rating.get('score')} - {clip(str(rating.get('feedback', '')), 240)}")
    return "\n".join(lines)


def parse_criteria(text: str, quoted: Sequence[str] = ()) -> dict[str, tuple[int | None, str]]:
    """Per criterion (score 1..5 or None when missing/out of range/unparseable, feedback), from the judge's
    own answer (perseval.parsing.judge_object: cut-off answers keep the criteria they completed; an object
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


# --- the responder's prompt (systems under test) -------------------------------------------------

ANSWER_SYSTEM = ("You are a search assistant. Answer the user's question directly, grounded in the search results. "
                 "Fit the depth, tone and layout of the answer to the user. Do not ask follow-up questions.")


def answer_messages(query: str, results: Sequence[Passage], sessions: Sequence[Document], *, search_chars: int,
                    history_chars: int) -> list[dict[str, str]]:
    """The question, search results (sharing `search_chars`), then the user's past sessions (sharing
    `history_chars`), as chat messages."""
    parts = [f"Question: {query}"]
    if results:
        each = max(search_chars // len(results), 1)
        parts.append("Search results:\n" + "\n".join(f"[{i}] {clip(p.text, each)}"
                                                     for i, p in enumerate(results, start=1)))
    if sessions:
        each = max(history_chars // len(sessions), 1)
        blocks = [f"--- past {s.meta.get('source') or 'session'} ---\n{clip(s.text, each)}" for s in sessions]
        parts.append("Some of this user's past chats and searches (they show what the user wants "
                     "and how they like answers):\n" + "\n".join(blocks))
    parts.append("Write the answer.")
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
