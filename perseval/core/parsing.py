"""Answer extraction, kept apart from metrics: pull JSON out of model text.

Two kinds of reader. Agents' answers: the first JSON value found (`extract_json`).
Judges' answers, which decide a score and may quote untrusted text, are read
more carefully (`judge_object`): asked with a JSON schema, the whole answer is
the object (and an answer cut off by max_tokens still gives the members it
completed); asked without one, the last complete object, never one that also
appears in the quoted material (a response cannot forge its own verdict).
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
# strict=False: a small model writes raw newlines inside strings, which strict JSON refuses
_DECODER = json.JSONDecoder(strict=False)


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    for open_ch, close_ch in (("{", "}"), ("[", "]")):
        start, end = text.find(open_ch), text.rfind(close_ch)
        if start != -1 and end > start:
            found.append(text[start : end + 1])
    return [text.strip(), *found]


def extract_json(text: str) -> Any | None:
    """The first JSON value found in `text` (whole text, fenced block, outermost braces), else None."""
    for cand in _candidates(text or ""):
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def extract_object(text: str) -> dict[str, Any] | None:
    value = extract_json(text)
    return value if isinstance(value, dict) else None


# --- judges' answers ---------------------------------------------------------------------------------

def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _value(s: str, i: int) -> tuple[Any, int, bool]:
    """(value, end, complete) of the JSON value at s[i]; objects may be cut off, other values must be whole."""
    if s[i] == "{":
        return _members(s, i)
    value, end = _DECODER.raw_decode(s, i)
    # a number that ends the text may have been cut (4 of 45): only a following character proves it whole
    if isinstance(value, (int, float)) and not isinstance(value, bool) and end >= len(s):
        raise ValueError("number cut off")
    return value, end, True


def _members(s: str, i: int) -> tuple[dict[str, Any], int, bool]:
    """The object at s[i] == '{': every member that is complete, and whether the object itself closed."""
    out: dict[str, Any] = {}
    i = _skip_ws(s, i + 1)
    while i < len(s):
        if s[i] == "}":
            return out, i + 1, True
        if s[i] == ",":
            i = _skip_ws(s, i + 1)
            continue
        if s[i] != '"':
            break
        try:
            key, i = _DECODER.raw_decode(s, i)
        except ValueError:
            break
        i = _skip_ws(s, i)
        if i >= len(s) or s[i] != ":":
            break
        i = _skip_ws(s, i + 1)
        if i >= len(s):
            break
        try:
            value, i, complete = _value(s, i)
        except ValueError:
            break
        out[key] = value  # a cut-off nested object keeps the members it completed
        if not complete:
            break
        i = _skip_ws(s, i)
    return out, i, False


def read_object_prefix(text: str) -> dict[str, Any] | None:
    """The JSON object that `text` starts with, tolerating a cut-off end: the members completed before the
    cut (`{"verdict": true, "reason": "The ta` -> {"verdict": True}). None when `text` is not an object."""
    s = (text or "").strip()
    fenced = re.match(r"```(?:json)?\s*", s)
    if fenced:  # a fence wrapping the whole answer (closed or cut off) is still the whole answer
        s = s[fenced.end():]
        s = s[: s.rfind("```")] if s.rstrip().endswith("```") else s
        s = s.strip()
    if not s.startswith("{"):
        return None
    obj, end, complete = _members(s, 0)
    if complete and s[end:].strip():
        return None  # text after the object: the answer is not the object
    return obj


def _objects(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every complete top-level JSON object in free text, in order, with its source text."""
    out, i = [], 0
    while (i := text.find("{", i)) != -1:
        try:
            value, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        if isinstance(value, dict):
            out.append((text[i:end], value))
            i = end
        else:
            i += 1
    return out


def judge_object(text: str, *, structured: bool, quoted: Sequence[str] = ()) -> dict[str, Any] | None:
    """The judge's own structured answer.

    structured (asked with a JSON schema): the whole answer is the object, a cut-off end tolerated, less
    what it copied word for word from an object in `quoted` (`_own_members`; a whole copy is no answer).
    Otherwise, or when the answer is not an object at all (a server that ignored the schema): the last
    complete object in the answer that does not also appear in `quoted`, the untrusted material the
    prompt quoted, so an agent response that carries a verdict cannot forge one."""
    planted = [v for q in quoted for _, v in _objects(q)]
    if structured and (whole := read_object_prefix(text)) is not None:
        return _own_members(whole, planted)
    for source, value in reversed(_objects(text or "")):
        if value in planted or any(source in q for q in quoted):
            continue
        return value
    return None


def _copies(value: dict[str, Any], planted: dict[str, Any]) -> bool:
    """Whether `value` is `planted` written out again, whole or cut off: every member equal, and at least
    one of them a non-empty string (text copied word for word; a bare `{"verdict": true}` may be the
    judge's own, cut off)."""
    if value == planted:
        return True
    return bool(value) and all(k in planted and planted[k] == v for k, v in value.items()) and any(
        isinstance(v, str) and v.strip() for v in value.values())


def _own_members(whole: dict[str, Any], planted: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A structured answer less what it copied from the quoted material: None when the whole answer is a
    planted object (a weak judge that parrots the response's forged verdict), else without the nested
    members copied from one (a criterion's {"score": 5, "feedback": "perfect"} lifted from the response).
    Measured: SmolLM2 as judge repeats a forged verdict word for word (scripts/measure_injection.py)."""
    if any(_copies(whole, p) for p in planted):
        return None
    return {k: v for k, v in whole.items()
            if not (isinstance(v, dict) and any(isinstance(p.get(k), dict) and _copies(v, p[k]) for p in planted))}


# a template's slot copied as the answer: "<one sentence>", "<reason>" (the prompts' own placeholder)
_PLACEHOLDER = re.compile(r"^\s*<[^<>]{0,80}>\s*$")


def reason_problem(text: str, *, structured: bool, quoted: Sequence[str] = (), reason_key: str = "reason") -> str | None:
    """Why a judge answer's reason cannot back its verdict, or None: the reason member is there but empty, or
    is a template placeholder copied from the prompt ("<one sentence>": a judge that fills the form in
    without reading). An answer cut off before its reason has no such member and keeps its verdict."""
    obj = judge_object(text, structured=structured, quoted=quoted)
    if obj is None or reason_key not in obj:
        return None
    reason = obj[reason_key]
    if not isinstance(reason, str) or not reason.strip():
        return f"the judge's {reason_key} is empty: its verdict is not read"
    if _PLACEHOLDER.match(reason):
        return f"the judge's {reason_key} is the prompt's placeholder {reason.strip()!r}: its verdict is not read"
    return None


_YES = re.compile(r"^\W*(yes|true|satisfied|present)\b", re.I)
_NO = re.compile(r"^\W*(no|false|not satisfied|absent|missing)\b", re.I)


def _as_binary(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and v in (0, 1):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in {"yes", "true", "1", "no", "false", "0"}:
        return float(v.strip().lower() in {"yes", "true", "1"})
    return None


def parse_binary(text: str, key: str = "verdict", *, structured: bool = False,
                 quoted: Sequence[str] = ()) -> tuple[float | None, str]:
    """A binary judgment from the judge's JSON {key: true/false | "yes"/"no" | 1/0} (see `judge_object`),
    or, when the answer holds no object, a leading yes/no.

    Returns (score, reason); score None means the answer could not be parsed.
    """
    obj = judge_object(text, structured=structured, quoted=quoted)
    if obj is not None and key in obj:
        return _as_binary(obj[key]), str(obj.get("reason", ""))
    if obj is not None:
        return None, ""
    if _YES.match(text or ""):
        return 1.0, ""
    if _NO.match(text or ""):
        return 0.0, ""
    return None, ""
