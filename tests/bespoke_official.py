"""A tiny Bespoke release written with the official names only (shared by tests/test_bespoke_layout.py,
test_bespoke_release.py, test_bespoke_search_history.py and test_protocol_sheets.py): every folder, file, column
and JSON key spelled out by hand as documented for the release on the Hugging Face hub (yonsei-dli/BESPOKE) and
in the evaluator repository (augustinLib/BESPOKE); nothing is imported from `perseval.benchmarks.bespoke.layout`
on purpose. The `official` fixture writes it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

Key = tuple[str, str]
Scores = dict[str, tuple[int, str]]  # criterion -> (score, feedback)

OFFICIAL_COLUMNS: dict[str, list[str]] = {
    "queries/query_table.parquet": ["user", "query-id", "query", "gold_information_need"],
    "gold_information/gold_information.parquet": ["user", "query-id", "id", "gold_information_value"],
    "personalized_rubric/personalized_rubric.parquet": ["user", "query-id", "id", "personalized_rubric_value"],
    "meta_test/meta_test_set.parquet": ["user", "query-id", "id", "meta_test_set_value"],
    "evaluation_shot/evaluation_shot.parquet": ["user", "query-id", "id", "evaluation_shot_value"],
    "chat_history/chat_history.parquet": ["user", "id", "history"],
    "search_history/search_history.parquet": ["user", "id", "history"],
}
CRITERIA_KEYS = {"need_alignment", "content_depth", "tone", "explanation_style"}

# --- the hand-written release (invented texts) ---------------------------------------------

# user2's only query reuses query-id "1": queries are keyed by (user, query-id).
QUERIES: dict[Key, tuple[str, str]] = {
    ("user1", "1"): ("How do I start composting on a small balcony?",
                     "Rents a flat with a tiny balcony; wants a method that does not smell, as short numbered steps."),
    ("user1", "2"): ("Is a second-hand e-bike a good idea?",
                     "Rides 12 km to work; wants battery wear explained plainly, without jargon."),
    ("user2", "1"): ("How can I keep my sourdough starter alive while I travel?",
                     "Bakes every weekend and is away for two weeks; likes a warm tone and the why behind each step."),
}
CLAIMS: dict[Key, list[str]] = {
    ("user1", "1"): ["A bokashi bin ferments scraps in a sealed bucket.", "Adding dry leaves reduces odour."],
    ("user1", "2"): ["Battery capacity fades with charge cycles.", "A shop can read the battery's cycle count.",
                     "Frame cracks near welds rule a bike out."],
    ("user2", "1"): ["A stiff starter kept in the fridge lasts about two weeks."],
}
RUBRICS: dict[Key, str] = {
    ("user1", "1"): "Need alignment\n- 5: odour-free balcony method\n\nExplanation style\n- 5: numbered steps",
    ("user1", "2"): "Tone\n- 5: plain and calm\n- 1: salesy",
    ("user2", "1"): "Content depth\n- 5: says why each step works",
}


def _scores(na: int, cd: int, tone: int, style: int, note: str) -> Scores:
    return {"need_alignment": (na, f"need {note}"), "content_depth": (cd, f"depth {note}"),
            "tone": (tone, f"tone {note}"), "explanation_style": (style, f"style {note}")}


SHOTS: dict[Key, list[tuple[str, Scores]]] = {
    ("user1", "1"): [("Use a bokashi bucket and layer dry leaves.", _scores(5, 4, 4, 3, "a")),
                     ("Compost heaps need a big garden.", _scores(1, 2, 3, 2, "b"))],
    ("user1", "2"): [("Ask the shop for the cycle count first.", _scores(4, 3, 5, 4, "c"))],
    ("user2", "1"): [("Feed it, thicken it, fridge it.", _scores(3, 2, 4, 1, "d")),
                     ("Dry a spoonful on baking paper as a backup.", _scores(4, 5, 5, 4, "e"))],
}
META: dict[Key, list[tuple[str, Scores]]] = {
    ("user1", "1"): [("Worm bins work well indoors.", _scores(3, 3, 4, 2, "f"))],
    ("user1", "2"): [("New bikes are always safer.", _scores(2, 1, 2, 3, "g"))],
    ("user2", "1"): [("Ask a neighbour to feed it daily.", _scores(2, 2, 5, 3, "h"))],
}
SESSIONS: list[tuple[str, str, str, str]] = [  # (source, user, id, history)
    ("chat", "user1", "0a4f6c1e-2b7d-4e11-9c3a-5d8e7f6a1b01", "User: my balcony is 2 m2\nAssistant: Small bins fit."),
    ("chat", "user1", "0a4f6c1e-2b7d-4e11-9c3a-5d8e7f6a1b02", "User: keep it short please\nAssistant: Sure."),
    ("chat", "user2", "7c2e9b40-6f1a-4d3b-8e5c-2a9d4b6c3e01", "User: my starter smells odd\nAssistant: Feed it."),
    ("chat", "user2", "7c2e9b40-6f1a-4d3b-8e5c-2a9d4b6c3e02", "User: tell me why, not what\nAssistant: Sure."),
    ("search", "user1", "3e8d1a72-9c4b-4f60-a1d2-6b7c8d9e0f01", "Search query: used e-bike battery test"),
    ("search", "user1", "3e8d1a72-9c4b-4f60-a1d2-6b7c8d9e0f02", "Search query: bokashi bran where to buy"),
    ("search", "user2", "5b6c7d8e-1f2a-4b3c-9d4e-0a1b2c3d4e01", "Search query: dried sourdough starter flakes"),
]


def _uuid(kind: int, key: Key) -> str:
    return f"00000000-0000-4000-800{kind}-{key[0][-1]}{int(key[1]):011d}"


def _response(contents: str, scores: Scores) -> dict[str, Any]:
    entry: dict[str, Any] = {"contents": contents}
    for criterion, (score, feedback) in scores.items():
        entry[criterion] = {"score": score, "feedback": feedback}
    return entry


def _write(root: Path, relpath: str, rows: list[dict[str, str]]) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture()
def official(tmp_path: Path) -> Path:
    """A tiny release written with the official names only: 2 users, 3 queries, 7 sessions."""
    root = tmp_path / "official"
    keys = list(QUERIES)
    _write(root, "queries/query_table.parquet", [
        {"user": u, "query-id": q, "query": QUERIES[u, q][0], "gold_information_need": QUERIES[u, q][1]}
        for u, q in keys])
    _write(root, "gold_information/gold_information.parquet", [
        {"user": k[0], "query-id": k[1], "id": _uuid(1, k),
         "gold_information_value": json.dumps({"gold_information": CLAIMS[k]})} for k in keys])
    _write(root, "personalized_rubric/personalized_rubric.parquet", [
        {"user": k[0], "query-id": k[1], "id": _uuid(2, k), "personalized_rubric_value": RUBRICS[k]} for k in keys])
    for relpath, column, data, n in (("evaluation_shot/evaluation_shot.parquet", "evaluation_shot_value", SHOTS, 3),
                                     ("meta_test/meta_test_set.parquet", "meta_test_set_value", META, 4)):
        rows = []
        for k in keys:
            value: dict[str, Any] = {"query": QUERIES[k][0], "gold_information_need": QUERIES[k][1],
                                     "response_list": [_response(c, s) for c, s in data[k]]}
            if column == "meta_test_set_value":
                value["annotator_note"] = "extra key, as the '...' in the official description allows"
            rows.append({"user": k[0], "query-id": k[1], "id": _uuid(n, k), column: json.dumps(value)})
        _write(root, relpath, rows)
    for source, relpath in (("chat", "chat_history/chat_history.parquet"),
                            ("search", "search_history/search_history.parquet")):
        _write(root, relpath, [{"user": u, "id": i, "history": h} for s, u, i, h in SESSIONS if s == source])
    return root

