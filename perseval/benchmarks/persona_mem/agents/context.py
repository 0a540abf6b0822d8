"""What the PersonaMem agents share: the part of a user's context a question may see, as chat messages.

A question sees the messages of its shared context before `end_index`. Under the swapped-history
control the documents are another persona's: then the first of that persona's contexts is cut at the
same index (the other user's life up to the same point), so the agent still gets a context of its shape.
"""
from __future__ import annotations

from typing import Any

from perseval.core.instances import Document, Instance, Passage
from perseval.benchmarks.persona_mem.views import PersonaMemPayload

CHARS_PER_TOKEN = 4  # a budget in tokens is kept as characters (English averages about four a token)


def visible(instance: Instance, documents: list[Document]) -> list[Document]:
    """The messages of the instance's context (else the owner's first context) before its end index."""
    if not documents:
        return []
    sid = PersonaMemPayload.of(instance).shared_context_id
    contexts = [d.meta.get("context") for d in documents]
    chosen = sid if sid in contexts else contexts[0]
    mine = [d for d in documents if d.meta.get("context") == chosen]
    end = PersonaMemPayload.of(instance).end_index
    return sorted((d for d in mine if d.meta["index"] < end), key=lambda d: d.meta["index"])


def as_messages(documents: list[Document]) -> list[dict[str, str]]:
    """Documents back as chat messages (their text carries a "Role: " prefix)."""
    out = []
    for d in documents:
        role = d.meta.get("role", "user")
        text = d.text.split(": ", 1)[1] if d.text.lower().startswith(f"{role}: ") else d.text
        out.append({"role": role, "content": text})
    return out


def clip(messages: list[dict[str, str]], tokens: int | None) -> tuple[list[dict[str, str]], int]:
    """The latest messages that fit `tokens` (None: all), whole messages only; (kept, dropped)."""
    if tokens is None:
        return messages, 0
    budget, kept = tokens * CHARS_PER_TOKEN, []
    for m in reversed(messages):
        if len(m["content"]) > budget:
            break
        budget -= len(m["content"])
        kept.append(m)
    kept.reverse()
    return kept, len(messages) - len(kept)


def position(doc_id: str) -> tuple[str, int]:
    """(shared context id, message index) of a document id `<context>#<index>`."""
    sid, _, index = doc_id.rpartition("#")
    return sid, int(index) if index.isdigit() else -1


def before_question(instance: Instance, passages: list[Passage]) -> list[Passage]:
    """Retrieved passages from messages before the question's end index, in its own context when any are."""
    end = PersonaMemPayload.of(instance).end_index
    early = [p for p in passages if 0 <= position(p.doc_id)[1] < end]
    own = [p for p in early if position(p.doc_id)[0] == PersonaMemPayload.of(instance).shared_context_id]
    return own or early


def system_first(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat templates want at most one system message, first: later ones become user turns."""
    return [m if m["role"] != "system" or i == 0 else {"role": "user", "content": f"[System] {m['content']}"}
            for i, m in enumerate(messages)]
