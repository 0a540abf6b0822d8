"""The stand-in OpenAI-compatible server (perseval.llm.standin): its answers satisfy the request's JSON schema,
carry readable token probabilities when asked, and reach perseval's real client over HTTP from a process of
its own, as vLLM's would."""
from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import pytest

from perseval.judges.probability import p_true
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.llm.settings import Sampling
from perseval.llm.standin import SchemaInstance, answer_text, standin_process

SCHEMAS = [
    {"type": "object", "properties": {"verdict": {"type": "boolean"}, "reason": {"type": "string"}},
     "required": ["verdict", "reason"]},
    {"type": "object", "properties": {"tag": {"enum": ["sci-fi", "comedy", "classic"]}}, "required": ["tag"]},
    {"type": "object", "properties": {"ranking": {"type": "array", "items": {"type": "string"}, "minItems": 5,
                                                  "maxItems": 5}}, "required": ["ranking"]},
    {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5},
                                      "feedback": {"type": "string", "minLength": 20}}},
    {"$defs": {"slot": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"const": "x"}},
                        "required": ["name", "value"]}},
     "type": "object", "properties": {"slots": {"type": "array", "items": {"$ref": "#/$defs/slot"}}}},
    {"anyOf": [{"type": "object", "properties": {"answer": {"type": ["string", "null"]}}}, {"type": "string"}]},
    {"type": "object", "properties": {"rating": {"type": "number", "exclusiveMinimum": 0, "maximum": 3},
                                      "facets": {"allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}},
                                                           {"required": ["a"]}]}}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_an_answer_asked_for_with_a_schema_is_an_instance_of_it(schema):
    for seed in range(20):  # the free choices (booleans, enum members) differ by seed: each must still validate
        jsonschema.validate(SchemaInstance(schema, seed).value(schema), schema)


def test_answers_are_fixed_by_the_request_and_differ_between_requests():
    a = {"messages": [{"role": "user", "content": "one"}]}
    b = {"messages": [{"role": "user", "content": "two"}]}
    assert answer_text(a) == answer_text(dict(a)) and answer_text(a) != answer_text(b)
    verdicts = {answer_text({"messages": [{"role": "user", "content": str(i)}],
                             "response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMAS[0]}}})
                for i in range(30)}
    assert any('"verdict": true' in v for v in verdicts) and any('"verdict": false' in v for v in verdicts)


def test_perseval_s_client_gets_schema_answers_and_p_true_from_the_process_over_http(tmp_path):
    with standin_process() as url:
        assert httpx.get(f"{url}/v1/models").json()["data"][0]["id"] == "stand-in"
        results = _ask(url, tmp_path, 8, [f"is {i} met?" for i in range(16)], json_schema=SCHEMAS[0], logprobs=5)
        served = httpx.get(f"{url}/stats").json()["served"]
    assert served == 16 and all(r.status == "ok" for r in results)
    for r in results:
        answer = json.loads(r.text)
        jsonschema.validate(answer, SCHEMAS[0])
        p = p_true(r.token_logprobs)
        assert p is not None and (p > 0.5) == answer["verdict"]  # the chosen word is the likelier one


def test_a_set_latency_delays_each_answer():
    with standin_process(latency_ms=300) as url:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        elapsed = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10).elapsed.total_seconds()
        bad = httpx.post(f"{url}/v1/chat/completions", content=b"{not json", timeout=10)
    assert elapsed >= 0.3 and bad.status_code == 400


def test_a_client_keeps_max_concurrency_requests_in_flight_over_its_connection_pools(tmp_path):
    """LLMClient spreads its requests over pools of a few connections (httpcore's bookkeeping costs per
    connection of a pool): the server still sees exactly max_concurrency requests at once, on as many
    connections, whatever the pools' size."""
    with standin_process(latency_ms=150) as url:
        results = _ask(url, tmp_path, 20, [f"q{i}" for i in range(70)])
        stats = httpx.get(f"{url}/stats").json()
    assert all(r.status == "ok" for r in results) and stats["served"] == 70
    assert stats["peak_in_flight"] == 20 and stats["connections"] == 20


def _ask(url: str, tmp_path, concurrency: int, questions: list[str], **kwargs) -> list:
    """Every question through one real LLMClient to the stand-in at `url`, all at once."""
    endpoint = Endpoint("stand-in", "openai", f"{url}/v1", "stand-in", "stand-in", max_concurrency=concurrency,
                        timeout_s=10, retries=0)
    client = LLMClient(endpoint, Sampling(temperature=0.0, max_tokens=64), RequestCache(tmp_path / "c.sqlite"),
                       role="judge", run_id="t", seed=1)

    async def ask():
        try:
            return await asyncio.gather(*(client.chat([{"role": "user", "content": q}], **kwargs) for q in questions))
        finally:
            await client.aclose()

    return asyncio.run(ask())
