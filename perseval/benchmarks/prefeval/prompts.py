"""The generation judge's four questions, written for perseval (the official prompts are not copied).

Each is one binary verdict; the response (and, for two checks, the preference) is quoted as data.
"""
from __future__ import annotations

from perseval.judges.quoting import data_rule, quote

_SYSTEM = ("You check one property of an assistant's reply to a user. " + data_rule("response") +
           " Reply with JSON only.")

QUESTIONS = {
    "acknowledges": ("Does the response mention, or clearly assume, any preference, habit, restriction or "
                     "trait of the user (for example 'since you prefer ...', 'given your ...')? A generic "
                     "reference to 'our conversation' with no preference named does not count."),
    "hallucinates": ("The response mentions a preference of the user. Is the preference it mentions "
                     "DIFFERENT from, or unrelated to, the user's real preference given above? Answer true "
                     "if it states the wrong preference, false if it states the real one."),
    "violates": ("Does the response recommend or propose something that goes against the user's preference, "
                 "without acknowledging the preference and explaining how to avoid the conflict? Answer false "
                 "if it respects the preference or handles any conflicting option with care."),
    "helpful": ("Does the response actually try to answer the user's question with useful content, rather "
                "than refusing, dodging, or only asking something back?"),
}
NEEDS_PREFERENCE = {"hallucinates", "violates"}


def check_messages(check: str, question: str, response: str, preference: str,
                   max_chars: int | None) -> list[dict[str, str]]:
    text = response if max_chars is None else response[:max_chars]
    parts = []
    if check in NEEDS_PREFERENCE:
        parts.append(f"The user's real preference:\n{preference}")
    parts += [f"The user's question:\n{question}", quote("response", text), QUESTIONS[check],
              'Answer {"verdict": true or false, "reason": "<one sentence>"}.']
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
