"""Function-calling helpers shared by tool-using agents: the tool calls of a reply in one shape, and their
arguments as a dict (OpenAI sends them as a JSON string, which a small model may get wrong)."""
from __future__ import annotations

import json
from typing import Any


def normalise_calls(raw_calls: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """Each call as {id, name, arguments (JSON text)}; a missing id is made unique per turn."""
    out = []
    for i, c in enumerate(raw_calls):
        args = c.get("arguments")
        out.append({"id": c.get("id") or f"call_{turn}_{i}", "name": str(c.get("name", "")),
                    "arguments": args if isinstance(args, str) else json.dumps(args or {})})
    return out


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as a dict; a malformed JSON string counts as no arguments."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def assistant_turn(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message that carried `calls` (normalised), for the conversation sent back."""
    return {"role": "assistant", "content": text or "", "tool_calls": [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in calls]}
