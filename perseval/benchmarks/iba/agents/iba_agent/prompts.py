"""Prompts of the IBA-Agent stages, written for perseval (facts from the paper, wording our own).

Short on purpose: the embedded model has a 4096-token context and writes ~40
tokens/s, and a small model follows a terse instruction better than a long one.
"""
from __future__ import annotations

from typing import Any

FACETS = ("style", "structure", "decision", "correction", "habit")

# What each facet's sub-query should probe; also the fallback when the expansion answer cannot be parsed.
FACET_HINTS = {
    "style": "tone, wording and voice the user likes",
    "structure": "format, length, order and layout the user likes",
    "decision": "choices, trade-offs and priorities the user made",
    "correction": "what the user corrected, rejected or complained about",
    "habit": "what the user usually or repeatedly does",
}

EXPANSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {f: {"type": "string"} for f in FACETS},
    "required": list(FACETS),
}
# The re-ranker's labels; salience.py turns them into Table 12's 0..10 score.
SIGNAL_HINTS = {
    "correction": "the user corrects or revises something the assistant produced",
    "rejection": "the user turns down a suggestion or a draft",
    "complaint": "the user complains or shows strong feeling",
    "statement": "the user says plainly what they want, need or always do",
    "behaviour": "the user's choices show a habit without saying so",
}
SALIENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"},
                   "signals": {"type": "array", "items": {"type": "string", "enum": list(SIGNAL_HINTS)}}},
    "required": ["relevant", "signals"],
}


# The paper's rater: the model gives the 0..10 score itself, from Table 12's contributions (salience: rating).
RATING_CRITERIA = (
    ("the user explicitly revises or corrects something", "3-4"),
    ("the user complains or shows strong feeling", "3-4"),
    ("the user states a preference directly", "2"),
    ("the user's behaviour shows an implicit pattern (e.g. a repeated choice)", "1"),
)
RATING_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["score"]}


def preferences_schema(limit: int) -> dict[str, Any]:
    items = {"type": "array", "items": {"type": "string"}, "maxItems": limit}
    return {"type": "object", "properties": {"preferences": items}, "required": ["preferences"]}


def _scenario_line(payload: dict[str, Any]) -> str:
    return f"Scenario: {payload['scenario']}\n" if payload.get("scenario") else ""


def system(text: str) -> dict[str, str]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def expansion_messages(task: str, payload: dict[str, Any]) -> list[dict[str, str]]:
    facets = "\n".join(f"- {f}: {h}" for f, h in FACET_HINTS.items())
    prompt = (f"{_scenario_line(payload)}Task: {task}\n\n"
              "Write one short search query per facet to find, in the user's chat history, "
              f"what they prefer for this kind of task:\n{facets}\n"
              "Reply with one JSON object mapping each facet name to its query.")
    return [system("You write search queries over a user's past conversations."), user(prompt)]


# Salience and rating prompts put what every passage of a task shares first (instructions, task) and the
# passage last, so llama-server's prompt cache serves the shared part of consecutive requests (prompt version
# 2; version 1 put the passage before the instructions: 18.3% of IBA-Agent's prompt tokens came from the cache).
def salience_messages(task: str, passage: str) -> list[dict[str, str]]:
    signals = "\n".join(f"- {k}: {h}" for k, h in SIGNAL_HINTS.items())
    prompt = (f"Task: {task}\n\nLabel the past message below.\n"
              "relevant: true if the message shows how the user wants something this task must decide "
              "(what to choose, how it should look), false otherwise.\n"
              f"signals: every kind of preference evidence the message carries, none if it carries none:\n{signals}\n"
              'Reply with JSON {"relevant": true or false, "signals": [...]}.\n\n'
              f"Past message:\n{passage}")
    return [system("You label past messages as evidence of user preferences."), user(prompt)]


def rating_messages(task: str, passage: str) -> list[dict[str, str]]:
    criteria = "\n".join(f"- {what}: +{points}" for what, points in RATING_CRITERIA)
    prompt = (f"Task: {task}\n\n"
              "Rate from 0 to 10 how strongly the past message below shows a preference of the user that matters "
              f"for the task. Add up what it carries:\n{criteria}\n"
              "0 if it says nothing about what the user wants for this task. Messages scoring 5 or more are kept.\n"
              'Reply with JSON {"score": n}.\n\n'
              f"Past message:\n{passage}")
    return [system("You rate past messages as evidence of user preferences."), user(prompt)]


def compact_messages(task: str, numbered: str) -> list[dict[str, str]]:
    prompt = (f"Task: {task}\n\nPast messages of the user, oldest first:\n{numbered}\n\n"
              "Keep only the messages that show how the user wants this kind of task done (what they asked for, "
              "corrected, rejected or chose) and drop the rest. Reply with one line per kept message: its number, "
              "then what the user said or did, in their words, e.g.\n3. wants the summary in bullet points")
    return [system("You condense a user's past messages into the evidence that matters for a task."), user(prompt)]


def extraction_messages(task: str, evidence: str, limit: int) -> list[dict[str, str]]:
    prompt = (f"Task: {task}\n\nEvidence from the user's history, oldest first (dates in brackets at the end):\n"
              f"{evidence or '(none)'}\n\n"
              f"List up to {limit} preferences of the user that matter for this task: what they asked for, "
              "corrected, rejected, chose again and again, or recently changed, each in a few words of your own "
              "(not a date, not a line number). When two pieces of evidence disagree, the later one wins. "
              'Reply with JSON {"preferences": ["...", "..."]}.')
    return [system("You infer a user's preferences from their past messages."), user(prompt)]


def plan_messages(task: str, preferences: list[str], action: str, slots: str) -> list[dict[str, str]]:
    prefs = "\n".join(f"- {p}" for p in preferences) or "- (none found)"
    if action == "call_api":
        goal = f"For each field below, say which value the preferences point to and why:\n{slots}"
    elif action == "qa":
        goal = "Say what the answer should state about the user's preferences."
    else:
        goal = "Say how the response should look: tone, structure, length, content choices and what to avoid."
    prompt = f"Task: {task}\n\nUser preferences:\n{prefs}\n\n{goal}\nWrite a short plan as bullet points."
    return [system("You plan how to carry out a task the way this user likes it."), user(prompt)]


_SYNTH_SYSTEM = ("You are a personal assistant. Carry out the task the way this user likes it, "
                 "following their latest preferences.")


def _context_block(evidence: str, preferences: list[str] | None, plan: str | None) -> str:
    parts = []
    if preferences:
        parts.append("User preferences:\n" + "\n".join(f"- {p}" for p in preferences))
    if plan:
        parts.append(f"Plan:\n{plan}")
    if evidence:  # the caller decides when the evidence itself goes in (settings.synthesis_evidence)
        parts.append(f"Evidence from the user's history, oldest first:\n{evidence}")
    return "\n\n".join(parts) + ("\n\n" if parts else "")


def answer_messages(task: str, action: str, evidence: str, preferences: list[str] | None,
                    plan: str | None) -> list[dict[str, str]]:
    """The final head for Generate(text) and QA: free text."""
    ask = ("Answer this question about the user's own preferences." if action == "qa"
           else "Write the response now.")
    prompt = f"{_context_block(evidence, preferences, plan)}Task: {task}\n{ask}"
    return [system(_SYNTH_SYSTEM), user(prompt)]


def slot_lines(slots: list[dict[str, Any]]) -> str:
    lines = []
    for s in slots:
        allowed = " | ".join(s["values"]) if s.get("values") else s.get("type", "string")
        note = f" ({s['description']})" if s.get("description") else ""
        lines.append(f"- {s['name']}{note}: {allowed}")
    return "\n".join(lines)


def api_call_messages(task: str, api: dict[str, Any], slots: list[dict[str, Any]], evidence: str,
                      preferences: list[str] | None, plan: str | None) -> list[dict[str, str]]:
    """The final head for CallAPI: one JSON object of the open slots."""
    prompt = (f"{_context_block(evidence, preferences, plan)}Task: {task}\n"
              f"API: {api['name']}. Pick one allowed value per field:\n{slot_lines(slots)}\n"
              "Reply with one JSON object mapping each field to its value.")
    return [system(_SYNTH_SYSTEM), user(prompt)]


def controller_messages(task: str, payload: dict[str, Any], tool_names: list[str]) -> list[dict[str, str]]:
    action = payload.get("action_type", "generate")
    prompt = (f"{_scenario_line(payload)}Task ({action}): {task}\n\n"
              "Gather evidence of how this user likes such tasks done, then produce the output. "
              f"Tools: {', '.join(tool_names)}. Call final_answer when you are ready.")
    return [system("You control a personal assistant that uses tools to find and apply user preferences."),
            user(prompt)]
