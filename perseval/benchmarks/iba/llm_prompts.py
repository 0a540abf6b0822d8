"""Prompts of LLM-mode construction, written for perseval (the paper's Figures 9-11 are not reused).

Three roles, as in the paper's multi-agent construction: a user simulator that
speaks as the persona and reveals a planned preference only through the planned
kind of behaviour, an assistant that answers it, and a task writer that phrases
a new request for the scenario. Each prompt asks for plain text: small models
follow that more reliably than a JSON wrapper, and cleaning is simple.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

# How each evidence kind should show in the user's message.
KIND_HINTS = {
    "behaviour": "by describing something you did (an action or habit, not an opinion)",
    "correction": "by asking the assistant to change something it produced for you",
    "complaint": "through a complaint or a moment of frustration",
    "rejection": "by turning down an option or draft the assistant offered",
    "statement": "by saying plainly what you like",
}
MAX_TURN_CHARS = 700
_LABEL = re.compile(r"^\s*(user|assistant|me|you)\s*:\s*", re.I)
_NEXT_SPEAKER = re.compile(r"\n\s*(user|assistant)\s*:|\n\s*\n", re.I)  # another speaker, or a new paragraph


def persona_line(persona: Mapping[str, Any]) -> str:
    traits = ", ".join(persona.get("traits") or [])
    return (f"You are {persona.get('background', 'an ordinary person')}; people describe you as {traits}. "
            f"Lately you are {persona.get('state', 'busy')}, and you are {persona.get('role', 'working')}.")


def user_system(persona: Mapping[str, Any]) -> str:
    return (f"{persona_line(persona)} You are chatting with an AI assistant. Write only your own next message: "
            "one to three natural sentences in the first person, no greeting, no quotation marks, no labels.")


def evidence_request(scenario: str, signals: Sequence[Mapping[str, str]], example: str) -> str:
    """The user simulator's brief for one evidence turn: what to reveal, how, and what changed."""
    lines = []
    for s in signals:
        line = f"- {s['dimension']}: {s['value']} Show it {KIND_HINTS.get(s['kind'], 'naturally')}."
        if s.get("previous"):
            line += (f" You used to prefer this instead: {s['previous']} Make clear that this has changed, "
                     f"because {s['reason']}.")
        lines.append(line)
    return (f"Context: {scenario}.\nYour message must reveal these habits without calling them preferences:\n"
            + "\n".join(lines)
            + f"\nAn example of this sort of message (write your own, do not copy it): \"{example}\"\nYour message:")


def noise_request(example: str) -> str:
    return ("Ask the assistant a casual question on the same everyday topic as this one, in your own words "
            f"(do not mention work tasks or your habits): \"{example}\"\nYour message:")


ASSISTANT_SYSTEM = ("You are a helpful AI assistant. Reply to the user's message in one or two short sentences. "
                    "Do not list or summarise what the user likes.")

TASK_SYSTEM = "You write the requests users send to an AI assistant. Reply with the request only."


def task_request(scenario: str, action: str, template: str, keep: Sequence[str]) -> str:
    what = "produce a text" if action == "generate" else "make a booking or purchase through an app"
    details = "; ".join(f'"{k}"' for k in keep)
    return (f"Scenario: {scenario} (the assistant must {what}).\nWrite one new request, in the user's own words, "
            f"for this task: \"{template}\"\nKeep these details word for word: {details}.\n"
            "Do not say how the user likes it done (no style, format or preference hints).\nRequest:")


def clean_turn(text: str) -> str:
    """The model's first paragraph without role labels, wrapping quotes or a continued dialogue ('' if none)."""
    text = _NEXT_SPEAKER.split((text or "").strip(), maxsplit=1)[0]
    text = _LABEL.sub("", text.strip()).strip().strip('"“”').strip()
    return text[:MAX_TURN_CHARS].strip()


def keeps_details(text: str, keep: Sequence[str]) -> bool:
    low = text.lower()
    return all(k.lower() in low for k in keep)
