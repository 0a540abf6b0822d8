"""Read and validate a Bespoke release from a local folder (nothing is fetched): all seven tables joined per
(user, query-id), JSON values parsed, chat and search sessions split into turns (`sessions.py`).

Every problem is an InputError naming the file, the row and the field. Rows
are counted from 0, as pandas and pyarrow number them, so `row 3` is
`pd.read_parquet(path).iloc[3]`. Nested JSON fields are named by their path
inside the value, e.g. `evaluation_shot_value.response_list[1].tone.score`.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from perseval.benchmarks.bespoke import layout as L
from perseval.benchmarks.bespoke.records import (
    BespokeQuery, BespokeRelease, CorpusPassage, CriterionRating, RatedResponse, Session,
)
from perseval.benchmarks.bespoke.sessions import CHAT_EXPECTED, session_meta, split_chat
from perseval.core import files
from perseval.core.errors import InputError

Row = dict[str, Any]
QueryKey = tuple[str, str]


def load_release(root: str | Path) -> BespokeRelease:
    """Read the release under `root`; the optional `corpus/` table is read when present."""
    root = Path(root)
    problem = files.path_problem(root, "folder")
    if problem is not None:
        raise InputError(root, f"{'not a folder' if problem == 'missing' else problem} (expected a Bespoke release "
                               "with queries/, gold_information/, ...)")
    queries, rows_of = _read_queries(root)
    _attach_gold(root, queries)
    _attach_rubrics(root, queries)
    _attach_rated(root, L.SHOTS, queries, "shots")
    _attach_rated(root, L.META_TEST, queries, "meta_test")
    _check_complete(root, queries, rows_of)
    _attach_task_types(root, queries)
    sessions = _read_sessions(root, {q.user for q in queries.values()})
    _check_histories(root, queries, rows_of, sessions)
    return BespokeRelease(list(queries.values()), sessions, _read_corpus(root))


# --- files and cells -----------------------------------------------------------------------


def read_rows(root: Path, spec: L.TableSpec) -> list[Row]:
    """All rows of one release table, after checking the folder, the file and the columns."""
    folder, path = root / spec.folder, spec.path(root)
    files.require(folder, f"folder missing; the release layout needs {spec.relpath}", "folder")
    problem = files.path_problem(path)
    if problem is not None:
        raise InputError(path, "file missing" if problem == "missing" else
                         f"{problem} (the release layout needs {spec.relpath})")
    with files.open_bytes(path) as fh:  # a file perseval may not read is named so
        try:
            table = pq.read_table(fh)
        except Exception as exc:  # pyarrow raises several types for a corrupt or non-Parquet file
            raise InputError(path, f"cannot be read as Parquet: {exc}") from None
    for col in spec.columns:
        if col not in table.column_names:
            raise InputError(path, f"missing column (found {table.column_names})", field=col)
    return table.select(list(spec.columns)).to_pylist()


def _text(path: Path, row: int, field: str, value: Any, *, allow_empty: bool = False) -> str:
    if isinstance(value, bytes):  # a binary column: text if it is UTF-8
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(path, f"not UTF-8 text (byte {exc.start + 1}); write the column as UTF-8 strings",
                             row=row, field=field) from None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(path, f"expected text, got {type(value).__name__}", row=row, field=field)
    text = str(value).strip() if isinstance(value, int) else value
    if not allow_empty and not text.strip():
        raise InputError(path, "empty value", row=row, field=field)
    return text


def _key(path: Path, row: int, rec: Row) -> QueryKey:
    # ids may be stored as integers in some exports; they are compared as text
    return _text(path, row, "user", rec["user"]).strip(), _text(path, row, "query-id", rec["query-id"]).strip()


def _json(path: Path, row: int, field: str, value: Any) -> Any:
    text = _text(path, row, field, value)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON ({files.json_problem(exc)})", row=row, field=field) from None


# --- queries and their attachments ---------------------------------------------------------


def _read_queries(root: Path) -> tuple[dict[QueryKey, BespokeQuery], dict[QueryKey, int]]:
    path = L.QUERIES.path(root)
    queries: dict[QueryKey, BespokeQuery] = {}
    rows_of: dict[QueryKey, int] = {}
    for i, rec in enumerate(read_rows(root, L.QUERIES)):
        key = _key(path, i, rec)
        if key in queries:
            raise InputError(path, f"duplicate query {key} (first at row {rows_of[key]})", row=i, field="query-id")
        query = _text(path, i, "query", rec["query"])
        need = _text(path, i, "gold_information_need", rec["gold_information_need"])
        queries[key] = BespokeQuery(key[0], key[1], query, need, [], "", [])
        rows_of[key] = i
    if not queries:
        raise InputError(path, "no queries")
    return queries, rows_of


def _owner(path: Path, row: int, rec: Row, queries: dict[QueryKey, BespokeQuery]) -> BespokeQuery:
    key = _key(path, row, rec)
    if key not in queries:
        raise InputError(path, f"query {key} is not in {L.QUERIES.relpath}", row=row, field="query-id")
    return queries[key]


def _attach_gold(root: Path, queries: dict[QueryKey, BespokeQuery]) -> None:
    path, col = L.GOLD.path(root), "gold_information_value"
    for i, rec in enumerate(read_rows(root, L.GOLD)):
        owner = _owner(path, i, rec, queries)
        owner.claims.extend(parse_claims(path, i, col, _json(path, i, col, rec[col])))


def parse_claims(path: Path, row: int, field: str, value: Any) -> list[str]:
    """{"gold_information": [claim, ...]} (or a bare list) -> non-empty claim strings."""
    if isinstance(value, dict):
        key = next((k for k in L.GOLD_KEY_ALIASES if k in value), None)
        if key is None:
            raise InputError(path, f"expected an object with key '{L.GOLD_KEY}', got keys {sorted(value)}",
                             row=row, field=field)
        value, field = value[key], f"{field}.{key}"
    if not isinstance(value, list) or not value:
        raise InputError(path, "expected a non-empty list of claims", row=row, field=field)
    claims = []
    for j, claim in enumerate(value):
        if not isinstance(claim, str) or not claim.strip():
            raise InputError(path, "a claim must be a non-empty string", row=row, field=f"{field}[{j}]")
        claims.append(claim.strip())
    return claims


def _attach_rubrics(root: Path, queries: dict[QueryKey, BespokeQuery]) -> None:
    path, col = L.RUBRIC.path(root), "personalized_rubric_value"
    for i, rec in enumerate(read_rows(root, L.RUBRIC)):
        owner = _owner(path, i, rec, queries)
        text = _text(path, i, col, rec[col]).strip()
        # one rubric row per query in the release; more rows are kept, one after the other
        owner.rubric = f"{owner.rubric}\n\n{text}" if owner.rubric else text


def _attach_rated(root: Path, spec: L.TableSpec, queries: dict[QueryKey, BespokeQuery], attr: str) -> None:
    path, col = spec.path(root), spec.json_column
    assert col is not None
    for i, rec in enumerate(read_rows(root, spec)):
        owner = _owner(path, i, rec, queries)
        getattr(owner, attr).extend(parse_rated_block(path, i, col, _json(path, i, col, rec[col])))


def parse_rated_block(path: Path, row: int, field: str, value: Any) -> list[RatedResponse]:
    """{query, gold_information_need, response_list: [...]} -> its rated responses."""
    if not isinstance(value, dict):
        raise InputError(path, f"expected a JSON object, got {type(value).__name__}", row=row, field=field)
    for key in L.SHOT_KEYS:
        if key not in value:
            raise InputError(path, f"missing key '{key}'", row=row, field=f"{field}.{key}")
    items = value["response_list"]
    if not isinstance(items, list) or not items:
        raise InputError(path, "expected a non-empty list", row=row, field=f"{field}.response_list")
    return [_rated(path, row, f"{field}.response_list[{k}]", item) for k, item in enumerate(items)]


def _rated(path: Path, row: int, field: str, item: Any) -> RatedResponse:
    if not isinstance(item, dict):
        raise InputError(path, "expected an object", row=row, field=field)
    contents = item.get(L.RESPONSE_TEXT_KEY)
    if not isinstance(contents, str) or not contents.strip():
        raise InputError(path, "expected non-empty response text", row=row, field=f"{field}.{L.RESPONSE_TEXT_KEY}")
    ratings = {name: _rating(path, row, f"{field}.{name}", item.get(name)) for name in L.CRITERIA}
    return RatedResponse(contents, ratings)


_SCORE_TEXT = re.compile(r"^\s*([1-5])\s*(?:/\s*5)?\s*$")


def _rating(path: Path, row: int, field: str, value: Any) -> CriterionRating:
    if not isinstance(value, dict):
        raise InputError(path, "expected an object {score, feedback}", row=row, field=field)
    score = rating_score(value.get("score"))
    if score is None:
        raise InputError(path, f"score must be an integer {L.SCORE_MIN}..{L.SCORE_MAX}, got {value.get('score')!r}",
                         row=row, field=f"{field}.score")
    feedback = value.get("feedback", "")
    if not isinstance(feedback, str):
        raise InputError(path, "feedback must be text", row=row, field=f"{field}.feedback")
    return CriterionRating(score, feedback)


def rating_score(value: Any) -> int | None:
    """An integer 1..5 from 4, 4.0, "4" or "4/5"; None for anything else (bools, 4.5, 0, "good")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value if L.SCORE_MIN <= value <= L.SCORE_MAX else None
    if isinstance(value, str):
        m = _SCORE_TEXT.match(value)
        return int(m.group(1)) if m else None
    return None


def _check_complete(root: Path, queries: dict[QueryKey, BespokeQuery], rows_of: dict[QueryKey, int]) -> None:
    """Every query needs gold claims (recall), a rubric and R-J examples (personalization judge)."""
    path = L.QUERIES.path(root)
    for key, q in queries.items():
        for what, spec, present in (("gold claims", L.GOLD, q.claims), ("rubric", L.RUBRIC, q.rubric),
                                    ("evaluation shots", L.SHOTS, q.shots)):
            if not present:
                raise InputError(path, f"query {key} has no {what} in {spec.relpath}",
                                 row=rows_of[key], field="query-id")


# --- histories and corpus ------------------------------------------------------------------


def _read_sessions(root: Path, users: set[str]) -> list[Session]:
    """Every chat and search session, split into turns; each user must be one who has queries."""
    sessions: list[Session] = []
    seen: dict[tuple[str, str], str] = {}
    for source, spec in L.HISTORY_TABLES.items():
        path = spec.path(root)
        for i, rec in enumerate(read_rows(root, spec)):
            user = _text(path, i, "user", rec["user"]).strip()
            if user not in users:
                raise InputError(path, f"unknown user {user!r}: no query of theirs in {L.QUERIES.relpath}",
                                 row=i, field="user")
            sid = _text(path, i, "id", rec["id"]).strip()
            if (user, sid) in seen:
                raise InputError(path, f"session id repeated for user {user!r} (also in {seen[user, sid]})",
                                 row=i, field="id")
            seen[user, sid] = spec.relpath
            text = _text(path, i, "history", rec["history"])
            if source == "chat" and split_chat(text) is None:
                raise InputError(path, f"cannot split the session into turns: expected {CHAT_EXPECTED}",
                                 row=i, field="history")
            sessions.append(Session(user, sid, source, text, session_meta(source, text)))  # type: ignore[arg-type]
    return sessions


def _check_histories(root: Path, queries: dict[QueryKey, BespokeQuery], rows_of: dict[QueryKey, int],
                     sessions: list[Session]) -> None:
    """Every user with a query has a history: the user-context settings and the judge's rubric rest on it."""
    with_history = {s.user for s in sessions}
    for key, q in queries.items():
        if q.user not in with_history:
            tables = " or ".join(spec.relpath for spec in L.HISTORY_TABLES.values())
            raise InputError(L.QUERIES.path(root), f"user {q.user!r} has no session in {tables}",
                             row=rows_of[key], field="user")


def _attach_task_types(root: Path, queries: dict[QueryKey, BespokeQuery]) -> None:
    """perseval's optional query_types/ table (the sample writes it; the official release has none)."""
    if not os.path.lexists(L.QUERY_TYPES.path(root)):  # a folder or a link loop of that name is refused below
        return
    path = L.QUERY_TYPES.path(root)
    for i, rec in enumerate(read_rows(root, L.QUERY_TYPES)):
        owner = _owner(path, i, rec, queries)
        kind = _text(path, i, "task_type", rec["task_type"]).strip()
        if kind not in L.TASK_TYPES:
            raise InputError(path, f"expected one of {list(L.TASK_TYPES)}, got {kind!r}", row=i, field="task_type")
        owner.task_type = kind


def _read_corpus(root: Path) -> list[CorpusPassage]:
    if not os.path.lexists(L.CORPUS.path(root)):
        return []  # optional: perseval's own offline search corpus, absent from the official release
    path, passages, seen = L.CORPUS.path(root), [], set()
    for i, rec in enumerate(read_rows(root, L.CORPUS)):
        doc_id = _text(path, i, "id", rec["id"]).strip()
        if doc_id in seen:
            raise InputError(path, "duplicate id", row=i, field="id")
        seen.add(doc_id)
        passages.append(CorpusPassage(doc_id, _text(path, i, "text", rec["text"])))
    return passages
