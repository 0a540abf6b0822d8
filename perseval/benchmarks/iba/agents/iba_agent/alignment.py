"""Broad Thinking & Deep Alignment (paper section 4): compact evidence -> preference extraction ->
task-preference alignment plan -> synthesis of the final output (text, QA answer, or API slots)."""
from __future__ import annotations

import re
from typing import Any

from perseval.benchmarks.iba.agents.iba_agent import prompts
from perseval.benchmarks.iba.agents.iba_agent.deep_retrieval import current_evidence
from perseval.benchmarks.iba.agents.iba_agent.state import Final, Scored, State, usage
from perseval.benchmarks.iba.answers import extract, open_slots
from perseval.benchmarks.iba.prompts import api_messages, api_schema, generate_messages
from perseval.parsing import extract_json
from perseval.records import instant

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(.*\S)")


# --- compact evidence (no LLM: a deterministic, cheap step) ---------------------------------


def _user_lines(text: str) -> str:
    """The user's side of a turn: the assistant's replies in a history are acknowledgements, not evidence."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    mine = [ln.split(":", 1)[1].strip() for ln in lines if ln.lower().startswith("user:")]
    return " ".join(mine or lines)


def compact_evidence(state: State) -> str:
    """The kept passages, oldest first and dated, trimmed, each line once.

    Time order matters: a dynamic preference is resolved by its latest
    evidence, so the extraction stage must see which came last.
    """
    kept = current_evidence(state)
    stamps = {d.doc_id: d.timestamp for d in state.ctx.documents(state.instance.user_id)}
    ordered = sorted(kept, key=lambda k: (instant(stamps.get(k.passage.doc_id, "")), k.passage.doc_id,
                                          k.passage.chunk_id))
    s = state.settings
    share = max(s.evidence_chars, s.evidence_total_chars // max(len(kept), 1))
    lines: list[str] = []
    for k in ordered:
        text = " ".join(_user_lines(k.passage.text).split())[:share]
        date = stamps.get(k.passage.doc_id, "")[:10]
        line = f"[{date}] {text}" if date else text
        if text and line not in lines:
            lines.append(line)
    evidence = "\n".join(f"{i}. {ln}" for i, ln in enumerate(lines, 1))
    state.log("compact_evidence", n_passages=len(kept), n_lines=len(lines), evidence=evidence)
    return evidence


# --- preference extraction -----------------------------------------------------------------


def _as_text(item: Any) -> str:
    if isinstance(item, dict):  # e.g. {"aspect": ..., "preference": ...}
        return "; ".join(str(v) for v in item.values() if v not in (None, ""))
    return str(item)


def parse_preferences(text: str, limit: int) -> list[str] | None:
    """Preferences from JSON {"preferences": [...]}, a JSON list, or bullet lines; None if none found."""
    value = extract_json(text)
    if isinstance(value, dict):
        value = value.get("preferences", next((v for v in value.values() if isinstance(v, list)), None))
    if isinstance(value, list):
        items = [" ".join(_as_text(v).split()) for v in value]
    else:
        items = [m.group(1) for ln in (text or "").splitlines() if (m := _BULLET.match(ln))]
    items = [i for i in dict.fromkeys(items) if i]
    return items[:limit] or None


async def extract_preferences(state: State) -> list[str]:
    evidence = compact_evidence(state)
    s = state.settings
    messages = prompts.extraction_messages(state.instance.query, evidence, s.max_preferences)
    result = await state.ask("extract_preferences", messages, json_schema=prompts.preferences_schema(s.max_preferences),
                             max_tokens=s.extract_max_tokens)
    parsed = parse_preferences(result.text, s.max_preferences)
    # an unreadable answer leaves no preferences: synthesis then falls back to the evidence itself
    state.preferences = parsed or []
    state.log("extract_preferences", preferences=state.preferences, fallback=parsed is None,
              raw=result.text[:1000], **usage(result))
    return state.preferences


# --- alignment plan --------------------------------------------------------------------------


async def plan_alignment(state: State) -> str:
    if state.preferences is None:  # the FC controller may ask for a plan first
        await extract_preferences(state)
    slots = prompts.slot_lines(_open_slots(state)) if state.action_type == "call_api" else ""
    messages = prompts.plan_messages(state.instance.query, state.preferences or [], state.action_type, slots)
    result = await state.ask("plan_alignment", messages, max_tokens=state.settings.plan_max_tokens)
    state.plan = result.text.strip()
    state.log("plan_alignment", plan=state.plan, fallback=not state.plan, **usage(result))
    return state.plan


async def broad_thinking(state: State) -> None:
    await extract_preferences(state)
    await plan_alignment(state)


# --- synthesis (the final output head) --------------------------------------------------------


def _open_slots(state: State) -> list[dict[str, Any]]:
    return open_slots(state.instance.payload["api"])


def _messages(state: State, kept: list[Scored]) -> list[dict[str, Any]]:
    s, task = state.settings, state.instance.query
    api = state.instance.payload.get("api") if state.action_type == "call_api" else None
    if s.synthesis == "rag":  # the baseline's prompt: passages concatenated with the task
        passages = [k.passage for k in kept]
        if api is not None:
            return api_messages(task, api, _open_slots(state), passages, s.passage_chars)
        return generate_messages(task, passages, s.passage_chars)
    # trajectory-level: the dated evidence timeline, read through the preferences and plan when there are any
    evidence = "" if state.preferences or state.plan else compact_evidence(state)
    if api is not None:
        return prompts.api_call_messages(task, api, _open_slots(state), evidence, state.preferences, state.plan)
    return prompts.answer_messages(task, state.action_type, evidence, state.preferences, state.plan)


async def synthesize(state: State) -> Final:
    kept = current_evidence(state)
    is_api = state.action_type == "call_api"
    s = state.settings
    schema = api_schema(_open_slots(state)) if is_api else None
    result = await state.ask("synthesize", _messages(state, kept), json_schema=schema,
                             max_tokens=s.api_max_tokens if is_api else s.max_tokens)
    answer = extract(state.instance, result.text)  # the benchmark's one extraction, as its judges read it
    state.final = Final(result.text, answer.parsed, answer.problem)
    state.log("synthesize", mode=s.synthesis, action_type=state.action_type, n_passages=len(kept),
              used_preferences=bool(state.preferences), used_plan=bool(state.plan), **usage(result))
    return state.final
