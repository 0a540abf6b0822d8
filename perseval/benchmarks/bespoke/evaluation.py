"""The personalization evaluator E_p (section 3.4, C.1, C.2), shared by the criteria judge and the
meta-evaluation's evaluator agent.

What it sees follows the official evaluator (augustinLib/BESPOKE): the first `max_shots` R-J pairs of the
query in release order (5 is the default of the official evaluator class; its run script passes 6), the
query's rubric and gold need, and the whole response, none of them clipped. A configured
`prompt_budget_tokens` is the one thing that may clip them (shots first, then the rubric, then the
response), and every clip is reported (`Clip`), never silent.

Answer layout (`answer_format`): `json` (also written `score_then_feedback`, the default) asks for a JSON
object with each criterion's score before its feedback, so a cut answer keeps its scores, each feedback at
most `feedback_chars` characters (200; None: no limit); `fields` (also written `reason_then_score`) is the
official layout: step-by-step thoughts in a <think> block, then "Need Alignment Score: n" / "... Feedback:"
lines, feedback never capped.

Three variants (Table 3, C.2): `feedback` (full E_p), `scores_only` (R-J pairs without feedback), `none`
(no personalization: query, response and general criterion definitions only). One `rubric` source serves
both personalized variants, so they differ only in the feedback of the examples: `release`, the release's
`personalized_rubric` (what the official evaluator reads; the authors derived it with GPT-5 from the full
R-J pairs), or `derive`, derived by the evaluator's own model with the prompt of Table 16 from the pairs
the variant is shown (with feedback for `feedback`, scores only for `scores_only`, as C.2 builds the
w/o-feedback rubric); a derived rubric is one request per (query, variant), answered from the request cache
after the first time.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from perseval.benchmarks.bespoke.layout import CRITERIA, CRITERION_TITLES, RESPONSE_TEXT_KEY
from perseval.benchmarks.bespoke.loader import rating_score
from perseval.benchmarks.bespoke.prompts import criteria_schema, parse_criteria
from perseval.judges.base import answer_budget
from perseval.judges.binary import REASON_CHARS
from perseval.judges.quoting import data_rule, quote
from perseval.llm.base import ChatModel
from perseval.llm.usage import prompt_record
from perseval.kernel.params import Params

CHARS_PER_TOKEN = 4  # a budget in tokens is applied as characters at this rate (no tokenizer of the judge here)
FIELDS_MAX_TOKENS = 1024  # the official line format after a <think> block (and uncapped JSON feedback)
Variant = Literal["feedback", "scores_only", "none"]
# the protocol's names of the two answer layouts -> the values stored (and keyed) since before they had them
ANSWER_FORMATS = {"score_then_feedback": "json", "reason_then_score": "fields"}


class EvaluatorParams(Params):
    variant: Variant = "feedback"
    max_shots: int = Field(5, ge=0)  # the official evaluator class's default (its run script passes 6)
    rubric: Literal["release", "derive"] = "release"  # the rubric source of every personalized variant
    prompt_budget_tokens: int | None = Field(None, ge=256)  # None: nothing is clipped
    answer_format: Literal["json", "fields"] = "json"  # fields: the official "Need Alignment Score: n" lines
    feedback_chars: int | None = Field(REASON_CHARS, ge=1)  # json: longest feedback per criterion (None: any)
    max_tokens: int | None = Field(None, ge=1)  # None: capped json sized from its schema, else FIELDS_MAX_TOKENS
    rubric_max_tokens: int = Field(400, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _layout(cls, data: Any) -> Any:
        """The protocol's layout names; the official layout has no schema, so its feedback is never capped."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        fmt = ANSWER_FORMATS.get(data.get("answer_format"), data.get("answer_format"))  # type: ignore[arg-type]
        if fmt is not None:
            data["answer_format"] = fmt
        if fmt == "fields":
            if data.get("feedback_chars") is not None:
                raise ValueError("feedback_chars: the reason_then_score (fields) layout has no answer schema and "
                                 "never caps feedback; leave feedback_chars unset or null")
            data["feedback_chars"] = None
        return data

    @property
    def key_compatible(self) -> dict[str, Any]:  # type: ignore[override]
        """`feedback_chars` came later; at 200 the JSON schema is the one sent before, so no new key. But
        scores_only derived its rubric whatever `rubric` said before the source was shared: with the
        release's rubric it now computes something else, so it keeps the field in its dump and gets a new
        key (no output stored under the old meaning is reused)."""
        return {} if (self.variant, self.rubric) == ("scores_only", "release") else {"feedback_chars": REASON_CHARS}


@dataclass
class Clip:
    """Characters cut from each part of a prompt to fit a token budget (all zero: nothing was cut)."""

    shots: int = 0
    rubric: int = 0
    response: int = 0

    @property
    def total(self) -> int:
        return self.shots + self.rubric + self.response

    def describe(self) -> str:
        parts = [f"{name} {n} chars" for name, n in (("shots", self.shots), ("rubric", self.rubric),
                                                      ("response", self.response)) if n]
        return "prompt clipped to the token budget: " + ", ".join(parts) if parts else ""


@dataclass
class Evaluation:
    """E_p's answer: per criterion (score 1..5 or None when unparseable, feedback); status of the request."""

    scores: dict[str, int | None]
    feedback: dict[str, str]
    raw: str
    status: str  # ok | failed
    error: str = ""
    rubric: str = ""
    clip: Clip = field(default_factory=Clip)
    prompt: dict[str, Any] | None = None  # the request as a trace keeps it (llm.usage.prompt_record)


# --- rubric derivation (Table 16) --------------------------------------------------------------------

_SCALE = {
    "need_alignment": "1 off the user's interests ... 5 exactly the aspects this user cares about most",
    "content_depth": "1 depth completely wrong for this user ... 5 exactly their level, effortless to follow",
    "tone": "1 a tone that offends or repels them ... 5 exactly the tone and manner they prefer",
    "explanation_style": "1 a structure they cannot learn from ... 5 the methods that work best for them",
}


def _pair_json(shot: dict[str, Any], with_feedback: bool) -> dict[str, Any]:
    out: dict[str, Any] = {RESPONSE_TEXT_KEY: shot.get(RESPONSE_TEXT_KEY, "")}
    for name in CRITERIA:
        rating = shot.get(name) or {}
        out[name] = {"score": rating.get("score"), **({"feedback": rating.get("feedback", "")} if with_feedback else {})}
    return out


def rubric_messages(query: str, need: str, shots: list[dict[str, Any]], with_feedback: bool) -> list[dict[str, str]]:
    """Ask for one user's per-query rubric (1..5 per criterion) from their rated responses to the query."""
    pairs = json.dumps({"query": query, "gold_information_need": need,
                        "response_list": [_pair_json(s, with_feedback) for s in shots]}, ensure_ascii=False, indent=1)
    what = "a score and feedback" if with_feedback else "a score"
    scale = "\n".join(f"- {CRITERION_TITLES[n]}: {_SCALE[n]}" for n in CRITERIA)
    user = (f"One person rated every response below on four criteria, giving {what} from 1 to 5 for each.\n"
            f"<ratings>\n{pairs}\n</ratings>\n\nGeneral scale of each criterion:\n{scale}\n\n"
            "Work out this person's own standards from how they rated, and write their personalized rubric "
            "for this query: for each criterion, what earns a 5, 4, 3, 2 and 1 for them. Be concrete and "
            "actionable. Write the rubric only, between <BEGIN ANALYSIS> and <END ANALYSIS>.")
    return [{"role": "system", "content": "You derive one user's personalized evaluation rubric from their own "
                                          "past ratings."},
            {"role": "user", "content": user}]


_ANALYSIS = re.compile(r"<\s*BEGIN ANALYSIS\s*>(.*?)(?:<\s*END ANALYSIS\s*>|\Z)", re.S | re.I)


def rubric_text(answer: str) -> str:
    """The rubric between the analysis markers (the whole answer when the model left them out)."""
    m = _ANALYSIS.search(answer)
    return (m.group(1) if m else answer).strip()


async def derive_rubric(model: ChatModel, query: str, need: str, shots: list[dict[str, Any]], with_feedback: bool,
                        *, repeat: int, max_tokens: int) -> tuple[str, str]:
    """(rubric, error): the derived rubric, or "" with the reason when the request failed or came back empty."""
    res = await model.chat(rubric_messages(query, need, shots, with_feedback), max_tokens=max_tokens, repeat=repeat)
    if res.status != "ok":
        return "", f"rubric request failed: {res.error}"
    text = rubric_text(res.text)
    return text, "" if text else "the derived rubric is empty"


# --- the E_p prompt (Table 17; C.2 for the baselines) --------------------------------------------------

_GENERIC = {
    "need_alignment": "does it address what was asked, directly and without irrelevant detours?",
    "content_depth": "is the level of detail and complexity appropriate for the question?",
    "tone": "is the tone appropriate and pleasant?",
    "explanation_style": "are structure, flow and illustrations (steps, examples, lists) easy to follow?",
}


def _shot_block(k: int, shot: dict[str, Any], with_feedback: bool, limit: int | None) -> str:
    text = str(shot.get(RESPONSE_TEXT_KEY, ""))
    lines = [f"[Example {k}]", quote("example", text if limit is None else text[:limit])]
    for name in CRITERIA:
        rating = shot.get(name) or {}
        lines.append(f"{CRITERION_TITLES[name]} score: {rating.get('score')}")
        if with_feedback:
            lines.append(f"{CRITERION_TITLES[name]} feedback: {rating.get('feedback', '')}")
    return "\n".join(lines)


def _answer_instructions(answer_format: str) -> str:
    if answer_format == "fields":
        lines = "\n".join(f"{CRITERION_TITLES[n].title()} Score: [1-5]\n{CRITERION_TITLES[n].title()} Feedback: ..."
                          for n in CRITERIA)
        return ("First think step by step about each criterion between <think> and </think>. Then write exactly "
                f"these lines (integer scores 1-5):\n{lines}")
    example = ", ".join(f'"{n}": {{"score": 3, "feedback": "..."}}' for n in CRITERIA)
    return f"Reply with JSON only, scores before feedback, in this form:\n{{{example}}}"


def ep_messages(p: EvaluatorParams, query: str, need: str, rubric: str, shots: list[dict[str, Any]],
                response: str) -> tuple[list[dict[str, str]], Clip]:
    """E_p's messages for one response, fitted to `p.prompt_budget_tokens` (what was cut is in the Clip)."""
    shots = shots[: p.max_shots] if p.variant != "none" else []
    clip = Clip()
    shot_limit: int | None = None
    parts = _ep_parts(p, query, need, rubric, shots, response, None)
    if p.prompt_budget_tokens is not None:
        over = len(parts) - p.prompt_budget_tokens * CHARS_PER_TOKEN
        if over > 0 and shots:  # shots first: each shot response keeps an equal share
            longest = max(len(str(s.get(RESPONSE_TEXT_KEY, ""))) for s in shots)
            shot_limit = max(longest - -(-over // len(shots)), 200)
            clip.shots = sum(max(len(str(s.get(RESPONSE_TEXT_KEY, ""))) - shot_limit, 0) for s in shots)
            over -= clip.shots
        if over > 0 and rubric:
            clip.rubric = min(over, max(len(rubric) - 400, 0))
            rubric, over = rubric[: len(rubric) - clip.rubric], over - clip.rubric
        if over > 0:
            clip.response = min(over, max(len(response) - 400, 0))
            response = response[: len(response) - clip.response]
        parts = _ep_parts(p, query, need, rubric, shots, response, shot_limit)
    system = ("You rate responses exactly as one particular person would. Their rubric and their own past ratings "
              "show what they value, how strict they are and how they word feedback.") if p.variant != "none" else \
        "You rate responses to a question on four general criteria."
    system += " " + data_rule("response", "example")
    return [{"role": "system", "content": system}, {"role": "user", "content": parts}], clip


def _ep_parts(p: EvaluatorParams, query: str, need: str, rubric: str, shots: list[dict[str, Any]], response: str,
              shot_limit: int | None) -> str:
    answer = _answer_instructions(p.answer_format)
    tail = f"Response to rate:\n{quote('response', response)}\n\n{answer}"
    if p.variant == "none":
        criteria = "\n".join(f"- {CRITERION_TITLES[n]}: {_GENERIC[n]}" for n in CRITERIA)
        return (f"Question: {query}\n\nCriteria (integer scores 1 to 5):\n{criteria}\n\n"
                f"Give each criterion a score and one or two sentences of feedback.\n\n{tail}")
    with_feedback = p.variant == "feedback"
    examples = "\n\n".join(_shot_block(k, s, with_feedback, shot_limit) for k, s in enumerate(shots, start=1))
    steps = ("For each criterion: find the key elements of the response, compare them with the examples and "
             "the gold information need, score with the rubric (integers 1-5 only), and write concise feedback "
             "in the style, length and politeness of the example feedback.") if with_feedback else \
        "For each criterion: compare the response with the examples and the gold need, and score it with the rubric."
    return (f"Question: {query}\nGold information need (the person's real intent; judge against it first): {need}\n\n"
            f"This person's rubric for this question:\n<rubric>\n{rubric}\n</rubric>\n\n"
            f"How this person rated earlier responses to the same question (match their strictness, average "
            f"scores and feedback style):\n<examples>\n{examples}\n</examples>\n\n{steps}\n\n{tail}")


_FIELD = {n: CRITERION_TITLES[n] for n in CRITERIA}


def parse_fields(text: str) -> dict[str, tuple[int | None, str]]:
    """The official output lines ("Need Alignment Score: 4", "... Feedback: ..."), after any <think> block;
    a score must be an integer 1..5 (anything else is None)."""
    body = re.sub(r"<\s*think\s*>.*?<\s*/\s*think\s*>", "", text or "", flags=re.S | re.I)
    out: dict[str, tuple[int | None, str]] = {}
    for name, title in _FIELD.items():
        label = title.replace(" ", r"\s+")
        score = re.search(rf"{label}\s+score\s*:\s*\**\s*([^\n]*)", body, re.I)
        value = rating_score(score.group(1).strip().strip("*").split()[0]) if score and score.group(1).strip() else None
        fb = re.search(rf"{label}\s+feedback\s*:\s*(.*?)(?=\n\s*[A-Za-z ]+\s+(?:score|feedback)\s*:|\Z)", body,
                       re.I | re.S)
        out[name] = value, fb.group(1).strip() if fb else ""
    return out


async def evaluate(model: ChatModel, p: EvaluatorParams, gold: dict[str, Any], query: str, response: str, *,
                   repeat: int = 0) -> Evaluation:
    """Run E_p (variant `p.variant`) on one response; never raises for a failed request."""
    shots = list(gold.get("shots", []))[: p.max_shots]
    rubric = ""
    if p.variant != "none":
        rubric = gold.get("rubric", "")
        if p.rubric == "derive":  # from the pairs this variant is shown (C.2), by the evaluator's model
            rubric, error = await derive_rubric(model, query, gold["need"], list(gold.get("shots", [])),
                                                p.variant == "feedback", repeat=repeat, max_tokens=p.rubric_max_tokens)
            if error:
                return Evaluation({n: None for n in CRITERIA}, {n: "" for n in CRITERIA}, "", "failed", error)
    messages, clip = ep_messages(p, query, gold.get("need", ""), rubric, shots, response)
    schema = criteria_schema(p.feedback_chars) if p.answer_format == "json" else None
    budget = p.max_tokens or (answer_budget(schema) if schema and p.feedback_chars else FIELDS_MAX_TOKENS)
    res = await model.chat(messages, json_schema=schema, max_tokens=budget, repeat=repeat)
    prompt = prompt_record(messages)
    if res.status != "ok":
        return Evaluation({n: None for n in CRITERIA}, {n: "" for n in CRITERIA}, res.text, "failed", res.error,
                          rubric, clip, prompt)
    parsed = parse_criteria(res.text, quoted=[response]) if p.answer_format == "json" else parse_fields(res.text)
    return Evaluation({n: parsed[n][0] for n in CRITERIA}, {n: parsed[n][1] for n in CRITERIA}, res.text, "ok",
                      rubric=rubric, clip=clip, prompt=prompt)
