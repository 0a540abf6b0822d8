"""The Bespoke loader and sample writer against the official release layout, spelled out by hand.

`loader.py` and `sample.py` both take every folder, file, column and JSON key
from `layout.py`, so a round trip between them cannot catch a wrong name there.
These tests write (and expect) the official names as literals instead, as
documented for the release on the Hugging Face hub (yonsei-dli/BESPOKE) and in
the evaluator repository (augustinLib/BESPOKE): every column holds strings,
`query-id` ("1", "2", ...) and `id` (a UUID) included. Nothing is imported from
`perseval.benchmarks.bespoke.layout` on purpose.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.records import BespokeQuery, RatedResponse
from perseval.benchmarks.bespoke.sample import write_sample

from .bespoke_official import (CLAIMS, CRITERIA_KEYS, META, OFFICIAL_COLUMNS, QUERIES, RUBRICS, SESSIONS, SHOTS,
                               Scores, official)  # noqa: F401 (official: a fixture)


def _rated(responses: list[RatedResponse]) -> list[tuple[str, Scores]]:
    return [(r.contents, {name: (c.score, c.feedback) for name, c in r.ratings.items()}) for r in responses]


def _as_written(q: BespokeQuery) -> dict[str, Any]:
    return {"query": q.query, "need": q.need, "claims": q.claims, "rubric": q.rubric,
            "shots": _rated(q.shots), "meta_test": _rated(q.meta_test)}


# --- tests ---------------------------------------------------------------------------------


def test_loader_reads_the_official_layout_exactly(official: Path) -> None:
    release = load_release(official)
    per_user: dict[str, list[str]] = {}
    for q in release.queries:
        per_user.setdefault(q.user, []).append(q.query_id)
    assert per_user == {"user1": ["1", "2"], "user2": ["1"]}
    loaded = {(q.user, q.query_id): _as_written(q) for q in release.queries}
    expected = {k: {"query": QUERIES[k][0], "need": QUERIES[k][1], "claims": CLAIMS[k], "rubric": RUBRICS[k],
                    "shots": SHOTS[k], "meta_test": META[k]} for k in QUERIES}
    assert loaded == expected
    sessions = sorted((s.source, s.user, s.session_id, s.text) for s in release.sessions)
    assert sessions == sorted(SESSIONS)
    assert release.corpus == []  # the official release has no corpus/ folder


def test_sample_writer_uses_the_official_names(tmp_path: Path) -> None:
    root = write_sample(tmp_path / "s", users=2, seed=7)
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    # corpus/ and query_types/ are perseval's own (optional) additions
    assert files == {*OFFICIAL_COLUMNS, "corpus/corpus.parquet", "query_types/query_types.parquet"}
    for relpath, columns in OFFICIAL_COLUMNS.items():
        schema = pq.read_schema(root / relpath)
        assert schema.names == columns, relpath
        assert all(pa.types.is_string(t) for t in schema.types), relpath  # the release stores text, ids included
    assert pq.read_schema(root / "corpus/corpus.parquet").names == ["id", "text"]

    gold = json.loads(pq.read_table(root / "gold_information/gold_information.parquet")
                      .column("gold_information_value")[0].as_py())
    assert list(gold) == ["gold_information"]
    assert gold["gold_information"] and all(isinstance(c, str) for c in gold["gold_information"])

    shot = json.loads(pq.read_table(root / "evaluation_shot/evaluation_shot.parquet")
                      .column("evaluation_shot_value")[0].as_py())
    assert set(shot) == {"query", "gold_information_need", "response_list"}
    entry = shot["response_list"][0]
    assert set(entry) == {"contents"} | CRITERIA_KEYS
    for criterion in CRITERIA_KEYS:
        assert set(entry[criterion]) == {"score", "feedback"}, criterion
        assert type(entry[criterion]["score"]) is int and 1 <= entry[criterion]["score"] <= 5, criterion


def test_the_checked_in_sample_is_the_writers_output_and_loads(tmp_path: Path) -> None:
    """tests/data/bespoke_sample is the project's own sample as files; it must not drift from the writer."""
    from perseval.benchmarks.bespoke.sample import CHECKED_IN

    checked_in = Path(__file__).parent / "data" / "bespoke_sample"
    fresh = write_sample(tmp_path, **CHECKED_IN)
    files = sorted(p.relative_to(fresh) for p in fresh.rglob("*.parquet"))
    assert files == sorted(p.relative_to(checked_in) for p in checked_in.rglob("*.parquet"))
    for rel in files:
        assert pq.read_table(checked_in / rel).equals(pq.read_table(fresh / rel)), rel
    release = load_release(checked_in)
    assert len({q.user for q in release.queries}) == CHECKED_IN["users"] and release.sessions
