"""Export a release to the per-user files the official evaluator reads (augustinLib/BESPOKE).

  evaluation_shot/{user}/query-id_{N}.json      {query, gold_information_need, response_list: [...]}
  personalized_rubric/{user}/query-id_{N}.txt   the rubric text
  gold_information/{user}/query-id_{N}.json     {"gold_information": [claim, ...]}

The official code finds a file by the first run of digits in the query id, so the export refuses two
queries of one user whose ids share those digits. Run: python -m perseval.benchmarks.bespoke.export SRC DST
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from perseval.benchmarks.bespoke import layout as L
from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.records import BespokeQuery
from perseval.core.errors import InputError


def official_query_number(query_id: str) -> str:
    """The official evaluator's file number for a query id: its first run of digits (else the id itself)."""
    m = re.search(r"\d+", query_id)
    return m.group(0) if m else query_id.strip()


def official_path(root: Path, folder: str, user: str, query_id: str) -> Path:
    return Path(root) / folder / user / f"query-id_{official_query_number(query_id)}.{L.OFFICIAL_FILES[folder]}"


def export_official(source: str | Path, dest: str | Path) -> list[Path]:
    """Write every query of the release at `source` in the official per-user layout under `dest`."""
    release = load_release(source)
    seen: dict[tuple[str, str], str] = {}
    written: list[Path] = []
    for q in release.queries:
        number = official_query_number(q.query_id)
        if (q.user, number) in seen:
            raise InputError(L.QUERIES.path(Path(source)), f"query ids {seen[q.user, number]!r} and {q.query_id!r} "
                             f"of user {q.user!r} both map to query-id_{number} in the official layout",
                             field="query-id")
        seen[q.user, number] = q.query_id
        written += _write_query(Path(dest), q)
    return written


def _write_query(dest: Path, q: BespokeQuery) -> list[Path]:
    shots = {"query": q.query, "gold_information_need": q.need, "response_list": [s.to_json() for s in q.shots]}
    files = {"evaluation_shot": json.dumps(shots, ensure_ascii=False, indent=1),
             "personalized_rubric": q.rubric,
             "gold_information": json.dumps({L.GOLD_KEY: q.claims}, ensure_ascii=False, indent=1)}
    out = []
    for folder, text in files.items():
        path = official_path(dest, folder, q.user, q.query_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out


if __name__ == "__main__":  # pragma: no cover - a thin command line
    if len(sys.argv) != 3:
        sys.exit("usage: python -m perseval.benchmarks.bespoke.export RELEASE_FOLDER OUT_FOLDER")
    print(f"wrote {len(export_official(sys.argv[1], sys.argv[2]))} files under {sys.argv[2]}")
