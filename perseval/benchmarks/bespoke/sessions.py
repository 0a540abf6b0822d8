"""Raw history sessions split into turns: chat (user / assistant) and search (query, visited pages).

The release stores each session as one raw text (Table 9 of the paper shows the shape):

  chat    "User: ...\\nAssistant: ...\\nUser: ..."   (a turn runs until the next role marker)
  search  "Search query: ...\\nVisits:\\n<Title> ...\\n<Page summary> ..."  (any number of visits)

A chat session with no role marker cannot be split and is a parse failure; a search session without
the "Search query:" marker takes its first line as the query (Table 20 treats a search as "a single
search line"). Role markers are matched case-insensitively, with the assistant's usual names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

USER_ROLES = ("user",)
ASSISTANT_ROLES = ("assistant", "gemini", "model", "ai", "chatgpt", "bot")
_ROLE = re.compile(rf"^\s*({'|'.join(USER_ROLES + ASSISTANT_ROLES)})\s*:\s?", re.I | re.M)
_QUERY = re.compile(r"^\s*search query\s*:\s*(.*)$", re.I | re.M)
_TAG = re.compile(r"<\s*(title|page summary)\s*>\s*", re.I)
CHAT_EXPECTED = "chat turns as lines starting with 'User:' or 'Assistant:'"


@dataclass
class Turn:
    role: str  # user | assistant
    text: str


@dataclass
class Visit:
    title: str
    summary: str = ""


@dataclass
class SearchSession:
    query: str
    visits: list[Visit] = field(default_factory=list)


def split_chat(text: str) -> list[Turn] | None:
    """The turns of a chat session, or None when no role marker is found."""
    marks = list(_ROLE.finditer(text))
    if not marks:
        return None
    turns = []
    for m, nxt in zip(marks, marks[1:] + [None]):
        body = text[m.end(): nxt.start() if nxt else len(text)].strip()
        role = "user" if m.group(1).lower() in USER_ROLES else "assistant"
        turns.append(Turn(role, body))
    return turns


def split_search(text: str) -> SearchSession:
    """The query and visited pages (title, page summary) of a search session."""
    m = _QUERY.search(text)
    query = m.group(1).strip() if m else text.strip().splitlines()[0].strip()
    visits: list[Visit] = []
    parts = _TAG.split(text)
    # parts: [before, tag, body, tag, body, ...]
    for tag, body in zip(parts[1::2], parts[2::2]):
        body = body.strip()
        if tag.lower() == "title":
            visits.append(Visit(body))
        elif visits and not visits[-1].summary:
            visits[-1].summary = body
        else:
            visits.append(Visit("", body))
    return SearchSession(query, visits)


def session_meta(source: str, text: str) -> dict[str, Any]:
    """What a Document carries about a parsed session: its source, turn count and parsed turns."""
    if source == "chat":
        turns = split_chat(text) or []
        return {"source": "chat", "turns": len(turns), "user_turns": sum(t.role == "user" for t in turns)}
    s = split_search(text)
    return {"source": "search", "turns": 1, "search_query": s.query,
            "visits": [{"title": v.title, "summary": v.summary} for v in s.visits]}


def selection_text(source: str, text: str) -> str:
    """A session as history selection sees it (Table 20): a chat in full, a search as its query string only."""
    return split_search(text).query if source == "search" else text
