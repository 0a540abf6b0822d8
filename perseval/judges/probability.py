"""P(true) of a binary verdict, read from the token probabilities of the judge's answer.

The judge answers the JSON object {"verdict": <bool>, "reason": ...}, the verdict its first member. The
verdict is therefore not the answer's first token (the grammar makes it `{"verdict": `), so the
probability is read at the position of the verdict's own token: the first generated token after the
text `"<key>":` (and any whitespace). Keeping the JSON form, rather than a plain `true`/`false` first
line, keeps one answer format for every dialect (llama-server's grammar, a `json_object` schema,
vLLM's `json_schema`, an unconstrained server) and the tolerant reader of a cut-off answer. At that
position the server's top alternatives hold the model's own choice between `true` and `false`:
llama-server and vLLM report them from the model's distribution before the grammar masks it (their
defaults), so both words are there even though the grammar lets only one through.

P(true) = p(true-tokens) / (p(true-tokens) + p(false-tokens)), the mass of the alternatives that spell a
prefix of `true` against those of `false` (`t`, `tr`, `true`; case and leading space ignored), so the
rest of the vocabulary (a `"`, a newline) does not dilute it. None when the answer carries no
probabilities or neither word is among the alternatives: the verdict is then the text one.
"""
from __future__ import annotations

import math
import re
from typing import Any

_LEAD = re.compile(r'^[\s":]+')
TOP_LOGPROBS = 10  # alternatives asked for per token: true and false are nearly always in the first few


def verdict_position(tokens: list[dict[str, Any]], key: str = "verdict") -> int | None:
    """The index of the token that starts the value of `key` in the answer's tokens, else None."""
    prefix = re.compile(rf'"{re.escape(key)}"\s*:\s*$')
    text = ""
    for i, tok in enumerate(tokens):
        piece = tok["token"]
        if prefix.search(text) and piece.strip():
            return i
        # a token may carry the colon and the value's start together (`": t`): the value begins inside it
        joined = text + piece
        m = re.search(rf'"{re.escape(key)}"\s*:\s*', joined)
        if m and m.end() < len(joined) and m.end() > len(text):
            return i
        text = joined
    return None


def _word_mass(top: dict[str, float], word: str) -> float:
    total = 0.0
    for tok, lp in top.items():
        t = _LEAD.sub("", tok).lower()  # a token may carry the colon or a quote before the value
        if t and word.startswith(t):
            total += math.exp(lp)
    return total


def p_true(tokens: list[dict[str, Any]] | None, key: str = "verdict") -> float | None:
    """P(true) of the verdict under `key` (see the module doc), or None when it cannot be read."""
    if not tokens:
        return None
    i = verdict_position(tokens, key)
    if i is None:
        return None
    top = dict(tokens[i].get("top") or {})
    top.setdefault(tokens[i]["token"], tokens[i]["logprob"])  # the chosen token, if the list left it out
    pt, pf = _word_mass(top, "true"), _word_mass(top, "false")
    return pt / (pt + pf) if pt + pf > 0 else None
