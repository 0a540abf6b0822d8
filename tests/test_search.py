"""Search back ends: gold oracle, and a web-search HTTP API (against a local stand-in server)."""
import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from perseval.core.errors import ConfigError
from perseval.core.instances import Instance
from perseval.retrieval.search import make_search

INST = Instance("q1", "bespoke", "u1", "u1", "what is x?", {}, {"claims": ["x is a letter", "x marks the spot"]})


class StandIn(BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):
        query = parse_qs(urlparse(self.path).query)
        StandIn.seen.append((query, self.headers.get("Authorization")))
        body = json.dumps({"web": {"results": [
            {"title": f"Result {i}", "url": f"https://example.org/{i}", "description": f"about {query['q'][0]}"}
            for i in range(int(query["count"][0]))]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/search"
    srv.shutdown()


def _make(mode):
    return make_search(mode, has_corpus=False, retrieve=lambda *a: [], gold_of=lambda iid: INST.gold)


def test_http_search_sends_query_count_and_key(server, monkeypatch):
    monkeypatch.setenv("MY_SEARCH_KEY", "s3cret")
    search = _make({"kind": "http", "url": server, "api_key_env": "MY_SEARCH_KEY",
                    "results_path": "web.results", "text_fields": ["description"]})
    passages = asyncio.run(search(INST, "what is x?", 2))
    assert [p.text for p in passages] == ["Result 0: about what is x?", "Result 1: about what is x?"]
    assert passages[0].doc_id == "https://example.org/0" and passages[0].score > passages[1].score
    query, auth = StandIn.seen[-1]
    assert query["count"] == ["2"] and auth == "Bearer s3cret"


def test_gold_search_returns_the_claims_and_modes_are_checked():
    passages = asyncio.run(_make("gold")(INST, "ignored", 0))
    assert [p.text for p in passages] == INST.gold["claims"]
    assert _make("none") is None and _make("corpus") is None  # no corpus indexed: no search
    with pytest.raises(ConfigError, match="unknown back end"):
        _make("bing")
    with pytest.raises(ConfigError, match="url"):
        _make({"kind": "http"})
