"""Single flight per request key (issue 45, item 1): a request is sent once, however many units ask it at once,
in one thread or several (in-process runs give each task thread its own event loop), in one process or in
several sharing the request cache; a request queued behind a busy slot takes an answer that came meanwhile.
The server is a local HTTP server that counts what really reaches it."""
from __future__ import annotations

import asyncio
import collections
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from perseval.llm.settings import Sampling
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint

from perseval.experiment.load import experiment_file
from tests.conftest import CONFIGS, REPO, copy_configs
from tests.http_stub import JsonHandler, completion, serve

QUESTIONS = ["Which gift suits Ana?", "Plan my week.", "Suggest a restaurant."]
ANSWER_S = 0.4  # long enough that every copy of a request is asked while the first is in flight


class Counting(JsonHandler):
    """Answers after ANSWER_S with the question echoed; counts each question it received."""

    seen: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def do_POST(self) -> None:
        question = self.request_json()["messages"][-1]["content"]
        with self.lock:
            self.seen[question] += 1
        time.sleep(ANSWER_S)
        self.reply(200, completion(f"answer to {question}"))


def _client(url: str, cache: Path, concurrency: int = 4, run_id: str = "r") -> LLMClient:
    endpoint = Endpoint("m", "openai", f"{url}/v1", "m", "api:m", None, concurrency, 30.0, 0)
    return LLMClient(endpoint, Sampling(max_tokens=9), RequestCache(cache), role="agent", run_id=run_id, seed=1)


async def _ask(client: LLMClient, questions: list[str]) -> list[str]:
    results = await asyncio.gather(*(client.chat([{"role": "user", "content": q}]) for q in questions))
    assert all(r.status == "ok" for r in results), results
    return [r.text for r in results]


def _thread_run(url: str, cache: Path, questions: list[str], out: list) -> None:
    """One task thread of an in-process run: an event loop and a client of its own."""
    client = _client(url, cache)
    out.append((asyncio.run(_ask(client, questions)), client.usage))


def test_identical_requests_in_flight_across_threads_are_sent_once(tmp_path):
    """Three 'forms' (threads), each asking every question twice at once: each question reaches the server
    once, every copy gets its answer, and the run's request log says sent == distinct."""
    Counting.seen = collections.Counter()
    cache = tmp_path / "cache.sqlite"
    with serve(Counting) as url:
        out: list = []
        threads = [threading.Thread(target=_thread_run, args=(url, cache, QUESTIONS * 2, out)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert dict(Counting.seen) == {q: 1 for q in QUESTIONS}
    for texts, _ in out:
        assert texts == [f"answer to {q}" for q in QUESTIONS * 2]
    assert sum(u.requests for _, u in out) == len(QUESTIONS)  # the others were answered without a request
    assert sum(u.cached for _, u in out) == 3 * 2 * len(QUESTIONS) - len(QUESTIONS)
    log = RequestCache(cache)
    assert sum(log.request_counts("r")["agent"].values()) == log.distinct_keys("r") == len(QUESTIONS)


def test_a_request_queued_behind_a_slot_takes_the_answer_that_came_meanwhile(tmp_path):
    """One slot: the second copy of a question waits behind others, the first copy's answer is cached by then."""
    Counting.seen = collections.Counter()
    with serve(Counting) as url:
        client = _client(url, tmp_path / "cache.sqlite", concurrency=1)
        asyncio.run(_ask(client, [QUESTIONS[0], QUESTIONS[1], QUESTIONS[0], QUESTIONS[2], QUESTIONS[1]]))
        again = _client(url, tmp_path / "cache.sqlite", run_id="r2")
        asyncio.run(_ask(again, QUESTIONS))  # after caching: a later run sends nothing
    assert dict(Counting.seen) == {q: 1 for q in QUESTIONS}
    assert again.usage.requests == 0 and again.usage.cached == len(QUESTIONS)


def test_a_follower_sends_the_request_its_abandoned_leader_did_not(tmp_path):
    """The first copy's task is cancelled mid-request: the copy that waited on it sends it and is answered."""
    Counting.seen = collections.Counter()
    with serve(Counting) as url:
        client = _client(url, tmp_path / "cache.sqlite")

        async def main() -> str:
            msg = [{"role": "user", "content": QUESTIONS[0]}]
            leader = asyncio.ensure_future(client.chat(msg))
            await asyncio.sleep(0.05)
            follower = asyncio.ensure_future(client.chat(msg))
            await asyncio.sleep(0.05)
            leader.cancel()
            return (await follower).text

        assert asyncio.run(main()) == f"answer to {QUESTIONS[0]}"
    assert Counting.seen[QUESTIONS[0]] == 2  # the abandoned one, then the follower's own


def _process_run(url: str, cache: str, questions: list[str], start: float, out: str) -> None:
    time.sleep(max(0.0, start - time.time()))  # both processes ask at the same moment
    client = _client(url, Path(cache))
    texts = asyncio.run(_ask(client, questions))
    Path(out).write_text(json.dumps({"texts": texts, "sent": client.usage.requests}))


def test_identical_requests_from_two_processes_are_sent_once(tmp_path):
    """Two processes sharing the request cache (a LocalCluster's workers) ask the same questions at once: the
    first to claim a key sends it, the other waits for its answer in the cache."""
    Counting.seen = collections.Counter()
    cache = tmp_path / "cache.sqlite"
    RequestCache(cache)  # created before the processes open it
    ctx = multiprocessing.get_context("spawn")
    with serve(Counting) as url:
        start = time.time() + 3.0
        procs = [ctx.Process(target=_process_run, args=(url, str(cache), QUESTIONS, start, str(tmp_path / f"{i}.json")))
                 for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
    assert dict(Counting.seen) == {q: 1 for q in QUESTIONS}
    outs = [json.loads((tmp_path / f"{i}.json").read_text()) for i in range(2)]
    assert all(o["texts"] == [f"answer to {q}" for q in QUESTIONS] for o in outs)
    assert sum(o["sent"] for o in outs) == len(QUESTIONS)
    log = RequestCache(cache)
    assert sum(log.request_counts("r")["agent"].values()) == log.distinct_keys("r") == len(QUESTIONS)


@pytest.mark.integration
def test_a_prefeval_run_of_three_forms_sends_each_distinct_request_once(tmp_path):
    """PrefEval's explicit and implicit forms ask the same questions: a real run (the CPU config on one
    preference) sends each distinct request once, agents and judge alike."""
    copy_configs(tmp_path / "configs")
    exp = yaml.safe_load(experiment_file("prefeval_cpu").read_text())
    exp["benchmarks"][0]["source"] = str(REPO / "tests" / "data" / "prefeval")
    (tmp_path / "configs" / "experiments" / "prefeval_cpu.yaml").write_text(yaml.safe_dump(exp))
    summary = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/prefeval_cpu.yaml",
                           "--sample", "1", "--output-root", str(tmp_path / "runs"), "--summary-json", str(summary),
                           "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PERSEVAL_PREFECT_IDLE_S": "0"})
    assert done.returncode in (0, 3), done.stdout + done.stderr
    out = json.loads(summary.read_text())
    assert out["llm_requests"] > 0 and out["llm_requests"] == out["llm_distinct_requests"], out["requests"]
    assert f"({out['llm_distinct_requests']} distinct)" in done.stdout
