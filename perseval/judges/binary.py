"""One binary judgment (is this checkpoint met? is this claim present? is this instance valid?).

The judge model answers JSON {"<key>": bool, "reason": str}, the verdict first and the reason
bounded, so the whole answer fits the max_tokens sized from the schema, and an answer cut off
anyway still gives its verdict. A failed request is `failed`; an answer that cannot be read is
`unscored` with its raw text, never a 0; so is a verdict whose reason is empty or the prompt's placeholder
copied ("<one sentence>": 8 of 395 quickstart assessments passed that way), never a pass.

A boolean verdict is also read as a probability (perseval.judges.probability): the request asks for the
top token alternatives, P(true) is read at the verdict's token, and the verdict is P(true) >= threshold
(method `logprobs`). A server that returns no probabilities leaves the text verdict (method `text`). An
empty or placeholder reason makes a text verdict unscored, but not a probability verdict: P(true) is read at
the verdict's token, before the reason is written (its feedback says the problem).
A judge bound with `reasons: false` asks for the verdict alone: the same messages, a schema without the reason
(so the answer is a few tokens), and no reason to check.
VERDICT_READING versions this request shape in the judge stage's key: judge outputs made before it
(text verdicts only) are recomputed, nothing else.
"""
from __future__ import annotations

from typing import Any, Sequence

from perseval.judges.base import Verdict, answer_budget
from perseval.judges.probability import TOP_LOGPROBS, p_true
from perseval.llm.base import ChatModel
from perseval.llm.usage import prompt_record
from perseval.core.parsing import parse_binary, reason_problem

VERDICT_READING = 1  # the judge request asks for token probabilities; bump when the verdict request changes
REASON_CHARS = 200  # one sentence: bounds the answer, so max_tokens can be sized from the schema
REASON: dict[str, Any] = {"type": "string", "maxLength": REASON_CHARS}
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "boolean"}, "reason": REASON},  # verdict first: it survives a cut
    "required": ["verdict", "reason"],
}


def without_reason(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` asking for its verdict alone."""
    props = {k: v for k, v in schema.get("properties", {}).items() if k != "reason"}
    return {**schema, "properties": props, "required": [k for k in schema.get("required", []) if k != "reason"]}


async def binary_verdict(model: ChatModel, messages: list[dict[str, Any]], *, quoted: Sequence[str] = (),
                         repeat: int = 0, max_tokens: int | None = None, schema: dict[str, Any] = VERDICT_SCHEMA,
                         key: str = "verdict", threshold: float = 0.5, reasons: bool = True) -> Verdict:
    """`quoted`: the untrusted texts the messages quote; a verdict that also appears in them is not read.
    `max_tokens` None: sized from the schema. A boolean verdict asks for token probabilities and is
    P(true) >= `threshold` where the server returns them. `reasons` False: the verdict alone (the schema
    without its reason, max_tokens sized from that schema)."""
    if not reasons:
        schema = without_reason(schema)
        max_tokens = answer_budget(schema)  # the judge's own budget is sized for a reason that is not asked
    boolean = schema.get("properties", {}).get(key, {}).get("type") == "boolean"
    result = await model.chat(messages, json_schema=schema, max_tokens=max_tokens or answer_budget(schema),
                              repeat=repeat, **({"logprobs": TOP_LOGPROBS} if boolean else {}))
    prompt = prompt_record(messages)
    if result.status != "ok":
        return Verdict(None, "failed", result.text, result.error, prompt)
    score, reason = parse_binary(result.text, key=key, structured=True, quoted=quoted)
    if score is None:
        return Verdict(None, "unscored", result.text, "judge answer could not be parsed", prompt)
    problem = reason_problem(result.text, structured=True, quoted=quoted) if reasons else None
    prob = p_true(getattr(result, "token_logprobs", None), key) if boolean else None
    if prob is None:
        if problem is not None:
            return Verdict(None, "unscored", result.text, problem, prompt)
        return Verdict(score, "scored", result.text, reason, prompt, method="text")
    # P(true) is read before the reason is written, so an empty or copied reason cannot have shaped it: the
    # verdict stands, the problem is said (the probes measure whether such a judge reads)
    return Verdict(float(prob >= threshold), "scored", result.text, problem or reason, prompt, p_true=prob,
                   method="logprobs")
