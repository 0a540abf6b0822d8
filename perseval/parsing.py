"""Answer extraction, kept apart from metrics: pull JSON out of free model text."""
from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


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


_YES = re.compile(r"^\W*(yes|true|satisfied|present)\b", re.I)
_NO = re.compile(r"^\W*(no|false|not satisfied|absent|missing)\b", re.I)


def parse_binary(text: str, key: str = "verdict") -> tuple[float | None, str]:
    """A binary judgment from JSON {key: true/false | "yes"/"no" | 1/0} or a leading yes/no.

    Returns (score, reason); score None means the answer could not be parsed.
    """
    obj = extract_object(text)
    if obj is not None and key in obj:
        v, reason = obj[key], str(obj.get("reason", ""))
        if isinstance(v, bool):
            return float(v), reason
        if isinstance(v, (int, float)) and v in (0, 1):
            return float(v), reason
        if isinstance(v, str) and v.strip().lower() in {"yes", "true", "1", "no", "false", "0"}:
            return float(v.strip().lower() in {"yes", "true", "1"}), reason
        return None, reason
    if _YES.match(text or ""):
        return 1.0, ""
    if _NO.match(text or ""):
        return 0.0, ""
    return None, ""
