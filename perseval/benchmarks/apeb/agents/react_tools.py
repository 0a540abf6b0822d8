"""The ReAct agent's tools: search the user's history, look up a product, compare products, finish.

Each tool returns a short observation for the model's context. Specs are OpenAI function specs (native
tool calling); `action_schema` is the same set as one JSON schema, for servers without tool calling
(`tool_calling: json`); `parse_action` reads an action written as text (the fallback of both).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Awaitable, Callable

from perseval.agents.base import AgentContext
from perseval.benchmarks.rankings import candidate_line
from perseval.core.parsing import extract_object
from perseval.core.instances import Document, Instance
from perseval.benchmarks.views import RankingPayload

FINISH = "finish"


def _spec(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    params = {"type": "object", "properties": properties, "required": list(properties)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


def tool_specs(k: int) -> list[dict[str, Any]]:
    ids = {"type": "array", "items": {"type": "string"}}
    return [
        _spec("search_history", "Search the shopper's past activity (views, likes, orders, videos, searches).",
              {"query": {"type": "string", "description": "what to look for, e.g. a brand or a feature"}}),
        _spec("product_details", "Full details of one candidate, and how often the shopper met it or its brand.",
              {"product_id": {"type": "string"}}),
        _spec("compare", "Compare several candidates side by side, with the shopper's history of each brand.",
              {"product_ids": ids}),
        _spec(FINISH, f"Submit the final answer: exactly {k} distinct candidate ids, most likely purchase first.",
              {"ranking": {**ids, "minItems": k, "maxItems": k}}),
    ]


def action_schema(candidate_ids: list[str], k: int, thought_chars: int) -> dict[str, Any]:
    """One JSON object per step: a short thought, a tool, its arguments (ids constrained to the candidates)."""
    ids = {"type": "array", "items": {"type": "string", "enum": candidate_ids}}
    args = {
        "search_history": {"query": {"type": "string", "minLength": 1, "maxLength": 80}},
        "product_details": {"product_id": {"type": "string", "enum": candidate_ids}},
        "compare": {"product_ids": {**ids, "minItems": 2, "maxItems": min(4, len(candidate_ids))}},
        FINISH: {"ranking": {**ids, "minItems": k, "maxItems": k}},
    }
    options = [{"type": "object", "properties": {
        "thought": {"type": "string", "maxLength": thought_chars}, "tool": {"const": name},
        "arguments": {"type": "object", "properties": props, "required": list(props)}},
        "required": ["thought", "tool", "arguments"]} for name, props in args.items()]
    return {"anyOf": options}


# --- reading an action written as text ------------------------------------------------------------

_MAIN_ARG = {"search_history": "query", "product_details": "product_id", "compare": "product_ids",
             FINISH: "ranking"}
_ACTION = re.compile(r"Action\s*:\s*([A-Za-z_]+)", re.I)
_INPUT = re.compile(r"Action\s*Input\s*:\s*(.+)", re.I | re.S)


def _arguments(name: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        parsed = extract_object(raw)
        if parsed is not None:
            return parsed
        try:
            raw = json.loads(raw)
        except (TypeError, ValueError):
            raw = raw.strip().strip('"')
    return {_MAIN_ARG[name]: raw} if name in _MAIN_ARG and raw not in (None, "") else {}


def parse_action(text: str) -> tuple[str, dict[str, Any], str] | None:
    """(tool, arguments, thought) from a JSON action {"tool", "arguments", "thought"}, a bare
    {"ranking": [...]} (a finish), or ReAct text 'Action: tool / Action Input: ...'; None if none."""
    obj = extract_object(text or "")
    if obj is not None:
        name = obj.get("tool") or obj.get("name") or obj.get("action")
        if isinstance(name, str) and name:
            raw = next((obj[key] for key in ("arguments", "args", "input", "parameters") if key in obj), None)
            if raw is None:  # arguments given flat beside the tool name
                raw = {k: v for k, v in obj.items() if k not in ("tool", "name", "action", "thought")}
            return name, _arguments(name, raw), str(obj.get("thought", ""))
        if "ranking" in obj:
            return FINISH, {"ranking": obj["ranking"]}, str(obj.get("thought", ""))
    m = _ACTION.search(text or "")
    if m:
        name = m.group(1)
        given = _INPUT.search(text)
        thought = text[:m.start()].replace("Thought:", "").strip()
        return name, _arguments(name, given.group(1).strip() if given else None), thought
    return None


# --- the tools ------------------------------------------------------------------------------------


class Toolbox:
    """The tools bound to one instance: the candidates, the user's history, the retriever."""

    def __init__(self, instance: Instance, ctx: AgentContext, search_k: int, chars: int):
        self.instance, self.ctx, self.search_k, self.chars = instance, ctx, search_k, chars
        self.cards = {c["id"]: c for c in RankingPayload.of(instance).candidates}
        docs: list[Document] = ctx.documents(instance.user_id) if ctx.documents else []
        self.history_texts = [d.text.lower() for d in docs]
        self.product_actions: dict[str, Counter] = {}
        for d in docs:
            if d.meta.get("product_id"):
                self.product_actions.setdefault(d.meta["product_id"], Counter())[d.meta.get("action", "")] += 1
        self.tools: dict[str, Callable[[dict[str, Any]], Awaitable[str]]] = {
            "search_history": self.search_history, "product_details": self.product_details, "compare": self.compare}

    def _clip(self, text: str) -> str:
        return text if len(text) <= self.chars else text[: self.chars] + " [...]"

    def _brand_mentions(self, brand: str) -> int:
        b = brand.lower()
        return sum(b in t for t in self.history_texts) if b else 0

    def _met(self, pid: str) -> str:
        seen = self.product_actions.get(pid)
        return ", ".join(f"{a} x{n}" for a, n in sorted(seen.items())) if seen else "never"

    async def search_history(self, args: dict[str, Any]) -> str:
        query = str(args.get("query") or self.instance.query)
        assert self.ctx.retrieve is not None
        found = await self.ctx.retrieve(self.instance.user_id, query, self.search_k)
        if not found:
            return f"no history matches {query!r}"
        return self._clip("\n".join(f"{i}. {p.text}" for i, p in enumerate(found, 1)))

    async def product_details(self, args: dict[str, Any]) -> str:
        pid = str(args.get("product_id", "")).strip()
        card = self.cards.get(pid)
        if card is None:
            return f"{pid!r} is not a candidate; candidates: {', '.join(self.cards)}"
        attrs = ", ".join(card.get("attributes") or []) or "-"
        return (f"{candidate_line(card)} | category {card.get('category', '-')} | attributes {attrs} | "
                f"in the shopper's history: this product {self._met(pid)}; its brand in "
                f"{self._brand_mentions(card.get('brand', ''))} events")

    async def compare(self, args: dict[str, Any]) -> str:
        raw = args.get("product_ids") or []
        ids = [str(x).strip() for x in (raw if isinstance(raw, list) else [raw])]
        known = [i for i in dict.fromkeys(ids) if i in self.cards]
        if len(known) < 2:
            return f"give at least two candidate ids; candidates: {', '.join(self.cards)}"
        rows = [f"{i}: ${float(self.cards[i]['price']):.2f} | {self.cards[i].get('brand') or '-'} "
                f"(brand in {self._brand_mentions(self.cards[i].get('brand', ''))} history events) | "
                f"{', '.join(self.cards[i].get('attributes') or []) or '-'} | product in history: {self._met(i)}"
                for i in known]
        return self._clip("\n".join(rows))
