"""Bespoke release reading beyond the thin slice: broken copies of every table of the hand-written official
fixture, session turns, the optional query types, and the export to the official evaluator's files."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perseval.benchmarks.bespoke.export import export_official, official_query_number
from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.sessions import split_chat, split_search
from perseval.core.errors import InputError
from tests.bespoke_official import CLAIMS, OFFICIAL_COLUMNS, QUERIES, RUBRICS, SHOTS, official  # noqa: F401
from perseval.experiment.load import experiment_file

JSON_COLUMNS = {"gold_information/gold_information.parquet": "gold_information_value",
                "meta_test/meta_test_set.parquet": "meta_test_set_value",
                "evaluation_shot/evaluation_shot.parquet": "evaluation_shot_value"}


def _rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def _rewrite(path: Path, rows: list[dict], columns: list[str]) -> None:
    pq.write_table(pa.table({c: pa.array([r[c] for r in rows], type=pa.string()) for c in columns}), path)


@pytest.mark.parametrize("relpath", sorted(OFFICIAL_COLUMNS))
def test_every_table_missing_a_column_is_named(official: Path, relpath: str) -> None:
    columns = OFFICIAL_COLUMNS[relpath]
    dropped = columns[-1]
    _rewrite(official / relpath, _rows(official / relpath), columns[:-1])
    with pytest.raises(InputError) as err:
        load_release(official)
    assert err.value.path.endswith(relpath) and err.value.field == dropped and "missing column" in err.value.detail


@pytest.mark.parametrize("relpath", sorted(JSON_COLUMNS))
def test_every_json_column_with_bad_json_names_row_and_field(official: Path, relpath: str) -> None:
    rows = _rows(official / relpath)
    rows[1][JSON_COLUMNS[relpath]] = '{"response_list": ['
    _rewrite(official / relpath, rows, OFFICIAL_COLUMNS[relpath])
    with pytest.raises(InputError) as err:
        load_release(official)
    assert (err.value.row, err.value.field) == (1, JSON_COLUMNS[relpath]) and "not valid JSON" in err.value.detail


@pytest.mark.parametrize("relpath", sorted(OFFICIAL_COLUMNS))
def test_every_table_with_an_unknown_user_names_row_and_field(official: Path, relpath: str) -> None:
    rows = _rows(official / relpath)
    rows[-1]["user"] = "user99"
    _rewrite(official / relpath, rows, OFFICIAL_COLUMNS[relpath])
    with pytest.raises(InputError) as err:
        load_release(official)
    if relpath.startswith("queries/"):  # the query table defines the users: user2's query is now user99's,
        assert err.value.path.endswith("gold_information.parquet")  # so user2's gold claims have no query
        assert err.value.field == "query-id" and "('user2', '1') is not in queries" in err.value.detail
    else:
        assert err.value.path.endswith(relpath) and err.value.row == len(rows) - 1
        assert err.value.field in ("query-id", "user") and "user99" in err.value.detail


def test_unsplittable_chat_session_names_row_and_expectation(official: Path) -> None:
    relpath = "chat_history/chat_history.parquet"
    rows = _rows(official / relpath)
    rows[2]["history"] = "just some notes without any speaker"
    _rewrite(official / relpath, rows, OFFICIAL_COLUMNS[relpath])
    with pytest.raises(InputError) as err:
        load_release(official)
    assert (err.value.row, err.value.field) == (2, "history") and "'User:' or 'Assistant:'" in err.value.detail


def test_sessions_are_split_into_turns(official: Path) -> None:
    release = load_release(official)
    chat = next(s for s in release.sessions if s.text.startswith("User: my balcony"))
    assert chat.meta == {"source": "chat", "turns": 2, "user_turns": 1}
    search = next(s for s in release.sessions if s.source == "search")
    assert search.meta["search_query"] == search.text.split(": ", 1)[1] and search.meta["visits"] == []
    turns = split_chat("User: hi\nthere\nGemini: hello\nuser: bye")
    assert [(t.role, t.text) for t in turns] == [("user", "hi\nthere"), ("assistant", "hello"), ("user", "bye")]
    s = split_search("Search query: ebike battery\nVisits:\n<Title> A\n<Page summary> a text\n<Title> B\n"
                     "<Page summary> b text")
    assert s.query == "ebike battery" and [(v.title, v.summary) for v in s.visits] == [("A", "a text"), ("B", "b text")]
    assert split_search("weather tomorrow").query == "weather tomorrow"


def test_query_types_table_is_optional_and_checked(official: Path) -> None:
    assert {q.task_type for q in load_release(official).queries} == {""}
    path = official / "query_types/query_types.parquet"
    path.parent.mkdir()
    rows = [{"user": "user1", "query-id": "1", "task_type": "guidance"},
            {"user": "user1", "query-id": "2", "task_type": "poetry"}]
    _rewrite(path, rows, ["user", "query-id", "task_type"])
    with pytest.raises(InputError) as err:
        load_release(official)
    assert (err.value.row, err.value.field) == (1, "task_type") and "poetry" in err.value.detail
    _rewrite(path, rows[:1], ["user", "query-id", "task_type"])
    assert {(q.user, q.query_id): q.task_type for q in load_release(official).queries}[("user1", "1")] == "guidance"


def _official_reader(root: Path, user: str, query_id: str) -> tuple[dict, str, dict]:
    """What augustinLib/BESPOKE's evaluator does to find a query's files: the first digits of the id."""
    qid = re.search(r"(\d+)", str(query_id).strip()).group(1)
    shots = json.loads((root / "evaluation_shot" / user / f"query-id_{qid}.json").read_text())
    rubric = (root / "personalized_rubric" / user / f"query-id_{qid}.txt").read_text()
    gold = json.loads((root / "gold_information" / user / f"query-id_{qid}.json").read_text())
    return shots, rubric, gold


def test_export_is_read_back_by_the_official_lookup(official: Path, tmp_path: Path) -> None:
    files = export_official(official, tmp_path / "out")
    assert len(files) == 3 * len(QUERIES)
    for (user, qid), (query, need) in QUERIES.items():
        shots, rubric, gold = _official_reader(tmp_path / "out", user, f"query-id {qid}")
        assert (shots["query"], shots["gold_information_need"]) == (query, need)
        assert [r["contents"] for r in shots["response_list"]] == [c for c, _ in SHOTS[user, qid]]
        assert shots["response_list"][0]["tone"]["score"] == SHOTS[user, qid][0][1]["tone"][0]
        assert rubric == RUBRICS[user, qid] and gold == {"gold_information": CLAIMS[user, qid]}


def test_export_refuses_ids_the_official_lookup_would_confuse(official: Path, tmp_path: Path) -> None:
    assert official_query_number("q-12b") == "12" and official_query_number("abc") == "abc"
    for relpath in ("queries/query_table.parquet", "gold_information/gold_information.parquet",
                    "personalized_rubric/personalized_rubric.parquet", "meta_test/meta_test_set.parquet",
                    "evaluation_shot/evaluation_shot.parquet"):
        rows = _rows(official / relpath)
        for r in rows:
            if (r["user"], r["query-id"]) == ("user1", "2"):
                r["query-id"] = "1b"  # user1 now has "1" and "1b": both are query-id_1 for the official code
        _rewrite(official / relpath, rows, OFFICIAL_COLUMNS[relpath])
    with pytest.raises(InputError, match="both map to query-id_1"):
        export_official(official, tmp_path / "out")
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


@pytest.mark.parametrize("name", ["bm25", "minilm"])
def test_local_corpus_search_over_page_summaries(tmp_path: Path, official: Path, name: str) -> None:
    """The default corpus of an official release is its users' visited-page summaries; BM25 and the dense
    retriever both find them through the `corpus` search back end."""
    import asyncio

    from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark
    from perseval.experiment.components import make_retriever
    from perseval.retrieval.settings import RetrieverConfig
    from perseval.experiment.config import load_config
    from perseval.core.instances import CORPUS_OWNER, Instance
    from perseval.retrieval.search import make_search
    from tests.conftest import CONFIGS

    relpath = "search_history/search_history.parquet"
    rows = _rows(official / relpath)
    rows[0]["history"] = ("Search query: used e-bike battery test\nVisits:\n<Title> Checking a used battery\n"
                          "<Page summary> A battery health report shows remaining capacity after many charge cycles.")
    _rewrite(official / relpath, rows, OFFICIAL_COLUMNS[relpath])
    data = BespokeBenchmark().build(sample=3, seed=0, source=official)
    corpus = [d for d in data.documents if d.owner == CORPUS_OWNER]
    assert [d.meta["source"] for d in corpus] == ["page_summary"]
    retriever = make_retriever(load_config(RetrieverConfig, CONFIGS / "retrievers" / f"{name}.yaml"))
    retriever.build(data.documents, tmp_path)
    index = retriever.open(tmp_path)
    search = make_search("corpus", has_corpus=index.has_owner(CORPUS_OWNER), retrieve=index.search,
                         gold_of=lambda iid: {})
    inst = Instance("i", "bespoke", "user1", "user1", "how healthy is a used battery?", {}, {})
    (hit,) = asyncio.run(search(inst, inst.query, 1))
    assert hit.doc_id == corpus[0].doc_id and "remaining capacity" in hit.text


def test_tables_2_and_7_of_the_hand_written_release(official: Path) -> None:
    from perseval.benchmarks.bespoke.benchmark import BespokeBenchmark

    bench = BespokeBenchmark({"corpus": False})
    data = bench.build(sample=10, seed=0, source=official)
    tables = bench.stats(data.instances, data.documents)
    t2 = tables["table2_overview"]["value"]
    assert (t2["users"], t2["queries"], t2["sessions"], t2["search_sessions"], t2["chat_sessions"]) == (2, 3, 7, 3, 4)
    assert t2["avg_sessions_per_user"] == 3.5 and t2["avg_gold_claims_per_query"] == 2.0
    assert t2["avg_rj_shots_per_query"] == pytest.approx(5 / 3) and pd.isna(t2["query_type_equitability"])
    t7 = tables["table7_per_user"]
    assert t7.loc["user1"].tolist() == [2, 2, 1.0, 1] and t7.loc["user2"].tolist() == [1, 2, 1.0, 1]
    assert t7.loc["Avg.", "search_sessions"] == 1.5
    assert tables["query_types"].to_dict()["queries"] == {"unknown": 3}


def test_the_paper_experiment_validates_against_a_release_folder(official: Path, monkeypatch) -> None:
    """bespoke_paper.yaml names the release by a relative `source:` (read from where perseval runs): with a
    release there it validates into Tables 3, 4 and 5 on vLLM models; without one it says which path is missing."""
    from perseval.experiment.load import load_experiment
    from perseval.core.errors import ConfigError
    from perseval.pipeline.plan import make_plan
    from tests.conftest import CONFIGS

    config = experiment_file("bespoke_paper")
    monkeypatch.chdir(official.parent)
    with pytest.raises(ConfigError, match=r"benchmarks\.0\.source.*data/bespoke.*does not exist"):
        load_experiment(config)
    shutil.copytree(official, official.parent / "data" / "bespoke")
    exp = load_experiment(config)
    plan = make_plan(exp)
    assert [b.name for b in exp.experiment.benchmarks] == ["bespoke", "bespoke-meta", "bespoke-history"]
    assert all(b.source == "data/bespoke" for b in exp.experiment.benchmarks)
    assert {exp.deployments[m].kind for m in exp.experiment.backbones} == {"vllm"}
    assert len(plan.data) == 3 and plan.cells
