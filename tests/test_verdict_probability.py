"""A binary verdict read from token probabilities, through the real client against a local HTTP server that
returns known logprobs: the request asks for them, P(true) is read at the verdict's token, the verdict is
P(true) >= the judge's threshold, a server that returns none leaves the text verdict, and the request
cache keys the new request and keeps the probabilities."""
from __future__ import annotations

import asyncio
import math
from typing import Any, Iterator

import pytest

from perseval.judges.base import JudgeBinding
from perseval.judges.binary import binary_verdict
from perseval.judges.probability import TOP_LOGPROBS, p_true
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.llm.settings import Sampling
from tests.http_stub import JsonHandler, completion, serve

ANSWER = '{"verdict": true, "reason": "It names the preference."}'
P_TRUE_TOKEN, P_FALSE_TOKEN = 0.6, 0.3  # what the server reports at the verdict token; the rest elsewhere


def tok(text: str, top: dict[str, float] | None = None) -> dict[str, Any]:
    top = top or {text: 0.0}
    return {"token": text, "logprob": top.get(text, 0.0), "bytes": None,
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top.items()]}


def with_logprobs(text: str) -> dict[str, Any]:
    """llama-server's tokens of ANSWER (as SmolLM2 splits it) with the verdict's alternatives."""
    verdict = {"true": math.log(P_TRUE_TOKEN), "false": math.log(P_FALSE_TOKEN), " t": math.log(0.02),
               '"': math.log(0.05)}
    tokens = [tok("{"), tok('"'), tok("ver"), tok("dict"), tok('":'), tok(" "), tok("true", verdict), tok(","),
              tok(' "'), tok("reason"), tok('":'), tok(' "It names the preference."'), tok("}")]
    body = completion(text)
    body["choices"][0]["logprobs"] = {"content": tokens}
    return body


@pytest.fixture()
def server() -> Iterator[tuple[list[dict[str, Any]], str, dict[str, bool]]]:
    requests: list[dict[str, Any]] = []
    mode = {"logprobs": True}

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            requests.append(self.request_json())
            self.reply(200, with_logprobs(ANSWER) if mode["logprobs"] else completion(ANSWER))

    with serve(Handler) as url:
        yield requests, f"{url}/v1", mode


def client(url: str, tmp_path, kind: str = "embedded") -> LLMClient:
    endpoint = Endpoint("m", kind, url, "m", "hf:abc", None, 4, 10.0, 0)
    return LLMClient(endpoint, Sampling(max_tokens=64), RequestCache(tmp_path / "cache.sqlite"), role="judge",
                     run_id="r", seed=1)


def verdict(url: str, tmp_path, threshold: float = 0.5, kind: str = "embedded"):
    async def go():
        c = client(url, tmp_path, kind)
        try:
            return await binary_verdict(c, [{"role": "user", "content": "Is it met?"}], threshold=threshold)
        finally:
            await c.aclose()

    return asyncio.run(go())


EXPECTED = (P_TRUE_TOKEN + 0.02) / (P_TRUE_TOKEN + 0.02 + P_FALSE_TOKEN)  # `true` and ` t` against `false`


@pytest.mark.parametrize("kind", ["embedded", "vllm", "openai"])
def test_the_verdict_is_p_true_read_at_the_verdict_token(server, tmp_path, kind):
    requests, url, _ = server
    v = verdict(url, tmp_path, kind=kind)
    assert requests[0]["logprobs"] is True and requests[0]["top_logprobs"] == TOP_LOGPROBS
    assert v.p_true == pytest.approx(EXPECTED) and v.method == "logprobs"
    assert v.score == 1.0 and v.raw == ANSWER


def test_the_threshold_decides_the_verdict(server, tmp_path):
    _, url, _ = server
    assert verdict(url, tmp_path / "a", threshold=0.9).score == 0.0  # P(true) 0.67 < 0.9: the text said true
    assert verdict(url, tmp_path / "b", threshold=0.6).score == 1.0


def test_the_binding_threshold_applies_to_the_judgment(server, tmp_path):
    from perseval.benchmarks.prefeval.judges.generation import GenerationJudge
    from perseval.core.instances import AgentOutput, Instance

    _, url, _ = server
    v = verdict(url, tmp_path)
    inst = Instance("i", "prefeval", "u", "g", "q", {}, {})
    out = AgentOutput("i", "a", 0, "text")
    strict = GenerationJudge({}).from_verdict(inst, out, JudgeBinding("j", None, 0, threshold=0.8), "helpful", v)
    assert strict.score == 0.0 and strict.p_true == pytest.approx(EXPECTED) and strict.method == "logprobs"


def test_a_server_without_logprobs_leaves_the_text_verdict(server, tmp_path):
    _, url, mode = server
    mode["logprobs"] = False
    v = verdict(url, tmp_path)
    assert v.p_true is None and v.method == "text" and v.score == 1.0


def test_the_cache_keys_the_logprobs_request_and_keeps_the_probabilities(server, tmp_path):
    requests, url, _ = server

    async def ask(logprobs: int | None):
        c = client(url, tmp_path)
        try:
            return await c.chat([{"role": "user", "content": "q"}], logprobs=logprobs)
        finally:
            await c.aclose()

    plain = asyncio.run(ask(None))
    assert "logprobs" not in requests[0] and "top_logprobs" not in requests[0]
    first = asyncio.run(ask(5))  # a different request: not answered by the plain one's cache entry
    assert len(requests) == 2 and requests[1]["top_logprobs"] == 5 and not first.cached
    again = asyncio.run(ask(5))
    assert len(requests) == 2 and again.cached and again.token_logprobs == first.token_logprobs
    assert p_true(again.token_logprobs) == pytest.approx(EXPECTED)
    assert asyncio.run(ask(10)).cached is False  # the number of alternatives is keyed too
    assert plain.token_logprobs is None or plain.cached is False


def test_the_verdict_position_is_found_when_a_token_carries_the_colon_and_the_value():
    tokens = [{"token": '{"verdict', "logprob": 0, "top": {}},
              {"token": '": f', "logprob": math.log(0.7), "top": {'": f': math.log(0.7), '": t': math.log(0.1)}},
              {"token": "alse", "logprob": 0, "top": {}}]
    assert p_true(tokens) == pytest.approx(0.1 / 0.8)


def test_a_placeholder_reason_leaves_a_probability_verdict_scored_and_a_text_one_unscored(tmp_path):
    placeholder = '{"verdict": true, "reason": "<one sentence>"}'

    class Handler(JsonHandler):
        logprobs = True

        def do_POST(self) -> None:
            self.request_json()
            self.reply(200, with_logprobs(placeholder) if Handler.logprobs else completion(placeholder))

    with serve(Handler) as url:
        v = verdict(f"{url}/v1", tmp_path / "a")
        assert v.status == "scored" and v.p_true == pytest.approx(EXPECTED) and "placeholder" in v.feedback
        Handler.logprobs = False
        t = verdict(f"{url}/v1", tmp_path / "b")
        assert t.status == "unscored" and t.p_true is None


def test_a_judge_without_reasons_sends_the_same_messages_and_a_schema_with_the_verdict_alone(server, tmp_path):
    """`reasons: false`: what goes out is the same messages with the reason dropped from the schema and the
    answer budget sized to the verdict; the text verdict of a server without probabilities is still read."""
    from perseval.benchmarks.iba.judges.checkpoint import IbaCheckpointJudge
    from perseval.core.instances import AgentOutput, Instance

    requests, url, mode = server
    inst = Instance("iba-1", "iba", "u", "g", "Plan my week.", {}, {"checkpoints": [{"id": "c1", "statement": "s"}]})
    out = AgentOutput("iba-1", "a", 0, "Monday: gym.")

    async def judge(reasons: bool):
        c = client(url, tmp_path / f"{reasons}-{len(requests)}")  # a fresh request cache each time
        try:
            return await IbaCheckpointJudge({}).judge(inst, out, JudgeBinding("j", c, 0, reasons=reasons))
        finally:
            await c.aclose()

    [full], [bare] = asyncio.run(judge(True)), asyncio.run(judge(False))
    sent_full, sent_bare = requests
    assert sent_bare["messages"] == sent_full["messages"]
    schema = sent_bare["response_format"]["schema"]  # llama-server's dialect (an embedded endpoint)
    assert "reason" in sent_full["response_format"]["schema"]["properties"]
    assert list(schema["properties"]) == ["verdict"] and schema["required"] == ["verdict"]
    assert sent_bare["max_tokens"] < sent_full["max_tokens"] and sent_bare["top_logprobs"] == TOP_LOGPROBS
    assert bare.p_true == full.p_true == pytest.approx(EXPECTED) and bare.score == 1.0
    mode["logprobs"] = False
    [text] = asyncio.run(judge(False))  # a new cache: sent again, read from the text
    assert text.method == "text" and text.score == 1.0 and text.status == "scored"
