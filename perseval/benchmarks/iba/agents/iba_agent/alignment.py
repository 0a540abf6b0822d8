"""Broad Thinking & Deep Alignment (paper section 4): compact evidence -> preference extraction ->
task-preference alignment plan -> synthesis of the final output (text, QA answer, or API slots)."""
from __future__ import annotations

import re
from typing import Any

from perseval.benchmarks.iba.agents.iba_agent import prompts
from perseval.benchmarks.iba.agents.iba_agent.deep_retrieval import current_evidence
from perseval.benchmarks.iba.agents.iba_agent.state import Final, Scored, State
from perseval.benchmarks.actions import api_messages, api_schema, extract, generate_messages, open_slots
from perseval.core.parsing import extract_json
from perseval.core.instances import instant
from perseval.llm.usage import prompt_record, trace_fields

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(.*\S)")


# --- compact evidence ------------------------------------------------------------------------


def _user_lines(text: str) -> str:
    """The user's side of a turn: the assistant's replies in a history are acknowledgements, not evidence."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    mine = [ln.split(":", 1)[1].strip() for ln in lines if ln.lower().startswith("user:")]
    return " ".join(mine or lines)


def evidence_lines(state: State) -> list[tuple[Scored, str]]:
    """(passage, line) per kept passage with text, oldest first, each line once: the user's side, trimmed,
    its date in brackets at the end - at the start a small model copies the dates as "preferences".

    Time order matters: a dynamic preference is resolved by its latest evidence, so the extraction stage
    must see which came last.
    """
    kept = current_evidence(state)
    stamps = {d.doc_id: d.timestamp for d in state.ctx.documents(state.instance.user_id)}
    ordered = sorted(kept, key=lambda k: (instant(stamps.get(k.passage.doc_id, "")), k.passage.doc_id,
                                          k.passage.chunk_id))
    s = state.settings
    share = max(s.evidence_chars, s.evidence_total_chars // max(len(kept), 1))
    out: list[tuple[Scored, str]] = []
    for k in ordered:
        text = " ".join(_user_lines(k.passage.text).split())[:share]
        date = stamps.get(k.passage.doc_id, "")[:10]
        line = f"{text} [{date}]" if date else text
        if text and line not in (ln for _, ln in out):
            out.append((k, line))
    return out


def _numbered(lines: list[str]) -> str:
    return "\n".join(f"{i}. {ln}" for i, ln in enumerate(lines, 1))


_CITED = re.compile(r"^\s*\[?(\d+)[.):\]]\s*(.*\S)")


def parse_compact(text: str, n: int) -> list[tuple[int, str]]:
    """(0-based line index, condensed text) per answer line that cites one of the `n` numbered messages."""
    out: dict[int, str] = {}
    for ln in (text or "").splitlines():
        m = _CITED.match(ln)
        if m and 1 <= int(m.group(1)) <= n and int(m.group(1)) - 1 not in out:
            out[int(m.group(1)) - 1] = m.group(2)
    return sorted(out.items())


async def compact_evidence(state: State) -> str:
    """The concise evidence set, made once per run: by rule (`compact: rule`) or by the model from the
    numbered passages (`compact: llm`, the paper's compact evidence function; the rule's lines when the
    answer cites none). The trace names the passages it holds."""
    if state.evidence is not None:
        return state.evidence
    lines = evidence_lines(state)
    held, text, extra = [k for k, _ in lines], _numbered([ln for _, ln in lines]), {}
    if state.settings.compact == "llm" and lines:
        messages = prompts.compact_messages(state.instance.query, text)
        result = await state.ask("compact_evidence", messages, max_tokens=state.settings.compact_max_tokens)
        cited = parse_compact(result.text, len(lines))
        dates = [ln[ln.rfind(" ["):] if ln.endswith("]") else "" for _, ln in lines]
        if cited:
            held = [lines[i][0] for i, _ in cited]
            text = _numbered([f"{t}{dates[i]}" for i, t in cited])
        extra = {"fallback": not cited, "raw": result.text[:1000], **trace_fields(result), **prompt_record(messages)}
    state.evidence, state.evidence_held = text, held
    state.log("compact_evidence", mode=state.settings.compact, n_passages=len(current_evidence(state)),
              n_lines=len(held), evidence=text, passages=[_ref(k) for k in held], **extra)
    return text


def _ref(k: Scored) -> dict[str, Any]:
    return {"doc_id": k.passage.doc_id, "chunk_id": k.passage.chunk_id, "score": k.passage.score,
            "salience": k.salience}


# --- preference extraction -----------------------------------------------------------------


_DATE = re.compile(r"\[?\(?\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+Z?)?\)?\]?")
_NUMBERING = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s*")
_WORD = re.compile(r"[^\W\d_]{2,}")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)("?)')


def _as_text(item: Any) -> str:
    if isinstance(item, dict):  # e.g. {"aspect": ..., "preference": ...}
        return "; ".join(str(v) for v in item.values() if v not in (None, ""))
    return str(item)


def clean_preference(item: str) -> str:
    """An extracted preference without the list numbering and dates a small model copies from the evidence;
    "" when nothing but those (and punctuation) was there."""
    text = _NUMBERING.sub("", _DATE.sub(" ", item))
    text = " ".join(text.split()).strip(" ;,.-")
    return text if _WORD.search(text) else ""


def _salvage(text: str) -> list[str]:
    """The strings of a `{"preferences": [...` answer cut off by max_tokens; the cut last one is kept when it
    has a few words (its beginning is still the model's preference)."""
    head, _, body = (text or "").partition("[")
    if "preferences" not in head:
        return []
    items = []
    for m in _QUOTED.finditer(body):
        value = m.group(1)
        if m.group(2) or len(value.split()) >= 2:  # whole, or a cut one worth keeping
            items.append(value.replace('\\"', '"'))
    return items


def parse_preferences(text: str, limit: int) -> list[str] | None:
    """Preferences from JSON {"preferences": [...]}, a JSON list, a cut JSON answer, or bullet lines, cleaned
    of copied numbering and dates; None if none found."""
    value = extract_json(text)
    if isinstance(value, dict):
        value = value.get("preferences", next((v for v in value.values() if isinstance(v, list)), None))
    if isinstance(value, list):
        items = [_as_text(v) for v in value]
    else:
        items = _salvage(text) or [m.group(1) for ln in (text or "").splitlines() if (m := _BULLET.match(ln))]
    cleaned = [clean_preference(i) for i in items]
    return [i for i in dict.fromkeys(cleaned) if i][:limit] or None


async def extract_preferences(state: State) -> list[str]:
    evidence = await compact_evidence(state)
    s = state.settings
    messages = prompts.extraction_messages(state.instance.query, evidence, s.max_preferences)
    result = await state.ask("extract_preferences", messages, json_schema=prompts.preferences_schema(s.max_preferences),
                             max_tokens=s.extract_max_tokens)
    parsed = parse_preferences(result.text, s.max_preferences)
    # an unreadable answer leaves no preferences: synthesis then reads the evidence itself (_messages)
    state.preferences = parsed or []
    state.log("extract_preferences", preferences=state.preferences, fallback=parsed is None,
              raw=result.text[:1000], **trace_fields(result), **prompt_record(messages))
    return state.preferences


# --- alignment plan --------------------------------------------------------------------------


async def plan_alignment(state: State) -> str:
    if state.preferences is None:  # the FC controller may ask for a plan first
        await extract_preferences(state)
    slots = prompts.slot_lines(_open_slots(state)) if state.action_type == "call_api" else ""
    messages = prompts.plan_messages(state.instance.query, state.preferences or [], state.action_type, slots)
    result = await state.ask("plan_alignment", messages, max_tokens=state.settings.plan_max_tokens)
    state.plan = result.text.strip()
    state.log("plan_alignment", plan=state.plan, fallback=not state.plan, **trace_fields(result),
              **prompt_record(messages))
    return state.plan


async def broad_thinking(state: State) -> None:
    await extract_preferences(state)
    await plan_alignment(state)


# --- synthesis (the final output head) --------------------------------------------------------


def _open_slots(state: State) -> list[dict[str, Any]]:
    return open_slots(state.payload.api)


def shows_evidence(state: State) -> bool:
    """Whether the final prompt holds the compact evidence: always, or when no preference was extracted
    (a plan always exists, even from "none found", so it cannot be the test)."""
    return state.settings.synthesis_evidence == "always" or not state.preferences


async def _messages(state: State, kept: list[Scored]) -> tuple[list[dict[str, Any]], list[Scored]]:
    """The final prompt and the passages whose content is in it."""
    s, task = state.settings, state.instance.query
    api = state.payload.api if state.payload.is_api_call else None
    if s.synthesis == "rag":  # the baseline's prompt: passages concatenated with the task
        passages = [k.passage for k in kept]
        if api is not None:
            return api_messages(task, api, _open_slots(state), passages, s.passage_chars), kept
        return generate_messages(task, passages, s.passage_chars), kept
    # trajectory-level: the preferences and plan, and the dated evidence timeline when shows_evidence says so
    evidence = await compact_evidence(state) if shows_evidence(state) else ""
    used = list(state.evidence_held) if evidence else []
    if api is not None:
        return prompts.api_call_messages(task, api, _open_slots(state), evidence, state.preferences,
                                         state.plan), used
    return prompts.answer_messages(task, state.action_type, evidence, state.preferences, state.plan), used


async def synthesize(state: State) -> Final:
    kept = current_evidence(state)
    is_api = state.action_type == "call_api"
    s = state.settings
    schema = api_schema(_open_slots(state)) if is_api else None
    messages, used = await _messages(state, kept)
    # the passages really in the final prompt (the trace convention every agent follows)
    state.log("context", passages=[_ref(k) for k in used])
    result = await state.ask("synthesize", messages, json_schema=schema,
                             max_tokens=s.api_max_tokens if is_api else s.max_tokens)
    answer = extract(state.instance, result.text)  # the benchmark's one extraction, as its judges read it
    state.final = Final(result.text, answer.parsed, answer.problem)
    state.log("synthesize", mode=s.synthesis, action_type=state.action_type, n_passages=len(kept),
              used_preferences=bool(state.preferences), used_plan=bool(state.plan), used_evidence=bool(used),
              **trace_fields(result), **prompt_record(messages))  # the final prompt, as the trace shows it
    return state.final
