"""The one OpenAI-compatible client, against a real HTTP server on 127.0.0.1 scripted per test: the
structured-output dialect per server kind, retries on server errors, a failed request recorded (never
raised, never cached), a timeout, and the request cache (a hit sends nothing)."""
from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from perseval.llm.settings import Sampling
from perseval.llm.cache import RequestCache
from perseval.llm.client import CAPTURE_ENV, CAPTURED_BODY, LLMClient, append_jsonl
from perseval.llm.endpoint import Endpoint
from tests.http_stub import JsonHandler, completion, serve

SCHEMA = {"type": "object", "properties": {"verdict": {"type": "boolean"}}, "required": ["verdict"]}


class Script:
    """What the server answers, in order; the last entry repeats. An int is an HTTP error status, a float a
    delay in seconds before answering, a str the assistant's text."""

    def __init__(self, *answers: int | float | str):
        self.answers, self.requests = list(answers), []


@pytest.fixture()
def server() -> Iterator[tuple[Script, str]]:
    script = Script("ok")

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            script.requests.append(self.request_json())
            answer = script.answers[min(len(script.requests) - 1, len(script.answers) - 1)]
            if isinstance(answer, float):
                time.sleep(answer)
                answer = "late"
            if isinstance(answer, int):
                self.reply(answer)
                return
            self.reply(200, completion(answer))

    with serve(Handler) as url:
        yield script, f"{url}/v1"


def client(url: str, tmp_path, kind: str = "vllm", retries: int = 2, timeout_s: float = 10.0,
           run_id: str = "r") -> LLMClient:
    endpoint = Endpoint("m", kind, url, "m", "hf:abc", None, 4, timeout_s, retries)
    return LLMClient(endpoint, Sampling(max_tokens=9), RequestCache(tmp_path / "cache.sqlite"), role="judge",
                     run_id=run_id, seed=1)


def ask(c: LLMClient, text: str = "hello", schema: dict | None = SCHEMA):
    async def go():
        try:
            return await c.chat([{"role": "user", "content": text}], json_schema=schema)
        finally:
            await c.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("kind,expected", [
    ("embedded", {"type": "json_object", "schema": SCHEMA}),
    ("vllm", {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": False}}),
    ("openai", {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": False}}),
])
def test_each_server_kind_gets_its_structured_output_dialect(server, tmp_path, kind, expected):
    script, url = server
    assert ask(client(url, tmp_path, kind)).text == "ok"
    assert script.requests[0]["response_format"] == expected


def test_server_errors_are_retried_then_answered(server, tmp_path):
    script, url = server
    script.answers = [500, 503, '{"verdict": true}']
    result = ask(client(url, tmp_path, retries=2))
    assert result.status == "ok" and result.text == '{"verdict": true}' and len(script.requests) == 3


def test_a_request_that_still_fails_is_recorded_not_raised_nor_cached(server, tmp_path):
    script, url = server
    script.answers = [500]
    result = ask(client(url, tmp_path, retries=1))
    assert result.status == "failed" and "500" in result.error and len(script.requests) == 2
    cache = RequestCache(tmp_path / "cache.sqlite")
    assert cache.request_counts("r") == {"judge": {"failed": 1}} and len(cache) == 0
    script.answers = ["recovered"]
    assert ask(client(url, tmp_path, run_id="r2")).text == "recovered"  # a re-run sends it again


def test_a_hung_server_times_out_as_a_failed_request(server, tmp_path):
    script, url = server
    script.answers = [3.0]
    started = time.monotonic()
    result = ask(client(url, tmp_path, retries=0, timeout_s=0.5))
    assert result.status == "failed" and time.monotonic() - started < 3.0


def test_a_cache_hit_sends_nothing_and_counts_no_request(server, tmp_path):
    script, url = server
    first = ask(client(url, tmp_path))
    second = ask(client(url, tmp_path, run_id="again"))
    assert not first.cached and second.cached and second.text == first.text and len(script.requests) == 1
    cache = RequestCache(tmp_path / "cache.sqlite")
    assert cache.request_counts("again") == {} and cache.request_counts("r") == {"judge": {"ok": 1}}
    ask(client(url, tmp_path), text="another question")  # another request is another key
    assert len(script.requests) == 2


def test_capture_appends_each_request_sent_as_the_server_got_it_without_the_key(server, tmp_path, monkeypatch):
    script, url = server
    capture = tmp_path / "sent.jsonl"
    monkeypatch.setenv(CAPTURE_ENV, str(capture))
    monkeypatch.setenv("STUB_KEY", "sk-capture-123456")
    endpoint = Endpoint("m", "embedded", url, "served-m", "gguf:abc", "STUB_KEY", 4, 10.0, 0)
    c = LLMClient(endpoint, Sampling(max_tokens=9), RequestCache(tmp_path / "c.sqlite"), role="judge", run_id="r",
                  seed=1)
    ask(c, text="my key is sk-capture-123456")
    ask(client(url, tmp_path, run_id="again"), text="my key is sk-capture-123456", schema=None)  # another key
    script.answers = [500]
    ask(client(url, tmp_path, retries=0), text="fails")
    ask(client(url, tmp_path), text="fails")  # failed requests are not cached: this one is sent again
    lines = [json.loads(line) for line in capture.read_text().splitlines()]
    assert [(r["stage"], r["status"]) for r in lines] == [("judge", "ok"), ("judge", "ok"), ("judge", "failed"),
                                                          ("judge", "failed")]
    first, sent = lines[0], script.requests[0]
    assert {k: first[k] for k in CAPTURED_BODY} == {k: sent.get(k) for k in CAPTURED_BODY} | {
        "messages": [{"role": "user", "content": "my key is [REDACTED]"}]}
    assert first["served_model"] == "served-m" and first["model"] == "m" and first["kind"] == "embedded"
    assert first["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert first["prompt_tokens"] == 3 and first["completion_tokens"] == 2 and first["latency_s"] > 0
    assert "sk-capture-123456" not in capture.read_text()
    ask(client(url, tmp_path, run_id="cached"), text="my key is sk-capture-123456", schema=None)
    assert len(capture.read_text().splitlines()) == 4  # a cache hit sends nothing, so nothing is captured


def test_capture_lines_of_concurrent_writers_never_mix(tmp_path):
    path = str(tmp_path / "sent.jsonl")
    big = "x" * 20_000  # far above PIPE_BUF: one write(2) per line still keeps it whole on a regular file

    def write(worker: int) -> None:
        for i in range(50):
            append_jsonl(path, {"worker": worker, "i": i, "text": big})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert len(rows) == 400 and {(r["worker"], r["i"]) for r in rows} == {(w, i) for w in range(8) for i in range(50)}
