"""The embedded default for real: llama.cpp's llama-server (built by `make install`) serving SmolLM2-135M
through perseval's own deployment and client. What each test checks is what the server did, read back from
the server itself: its slots (`/slots`), the fields it applied, the prompt tokens it took from its caches
(`timings.cache_n`) instead of computing them."""
from __future__ import annotations

import asyncio
import json
import time

import httpx
import jsonschema
import pytest

from perseval.llm.settings import DeploymentConfig, ModelConfig, Sampling
from perseval.experiment.config import load_config
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment
from perseval.llm.embedded import REPEAT_PENALTY

from .conftest import CONFIGS

pytestmark = pytest.mark.integration

MODEL = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")
DEPLOYMENT = load_config(DeploymentConfig, CONFIGS / "deployments" / "smollm2-135m-cpu.yaml")
OTHER = load_config(DeploymentConfig, CONFIGS / "deployments" / "smollm2-135m-cpu-llama-cpp-python.yaml")
VERDICT = {"type": "object", "properties": {"verdict": {"type": "boolean"}, "reason": {"type": "string"}},
           "required": ["verdict", "reason"]}
# a long shared part (instructions and a history, as a judge's rubric or an APeB session's history), then a tail
HISTORY = "\n".join(f"- day {d}: viewed trail running shoes, size {38 + d % 6}, brand {'ABCDEF'[d % 6]}, "
                    f"price {20 + 3 * d} dollars" for d in range(40))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The shipped deployment with two slots, as on a one-core share of this machine."""
    with Deployment(MODEL, DEPLOYMENT.model_copy(update={"parallel": 2}), tmp_path_factory.mktemp("logs")) as ep:
        yield ep


def root(endpoint) -> str:
    return endpoint.base_url.removesuffix("/v1")


def chat(endpoint, messages, **extra):
    body = {"model": endpoint.served_model, "messages": messages, "temperature": 0.0, "max_tokens": 16,
            **endpoint.extra_body, **extra}
    resp = httpx.post(f"{endpoint.base_url}/chat/completions", json=body, timeout=120)
    resp.raise_for_status()
    return resp.json()


def shopper(query: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are a personal shopping assistant."},
            {"role": "user", "content": f"The shopper's recent activity:\n{HISTORY}\n\nThey searched for: {query}"}]


def test_the_server_has_the_slots_and_the_per_request_context_of_the_deployment(server):
    slots = httpx.get(f"{root(server)}/slots", timeout=10).json()
    assert len(slots) == 2 and {s["n_ctx"] for s in slots} == {DEPLOYMENT.context_length}
    assert server.max_concurrency == 3  # the client fills both and keeps one queued


def test_the_client_gets_schema_bound_answers_and_the_server_applies_its_fields(server, tmp_path):
    client = LLMClient(server, Sampling(max_tokens=48), RequestCache(tmp_path / "c.sqlite"), role="judge",
                       run_id="r", seed=3)

    async def ask():
        try:
            return await client.chat([{"role": "user", "content": "Is Paris in France? Answer in JSON."}],
                                     json_schema=VERDICT)
        finally:
            await client.aclose()

    result = asyncio.run(ask())
    assert result.status == "ok" and result.prompt_tokens > 0 and result.completion_tokens > 0
    jsonschema.validate(json.loads(result.text), VERDICT)
    last = [s for s in httpx.get(f"{root(server)}/slots", timeout=10).json() if s.get("params")]
    assert last and all(s["params"]["repeat_penalty"] == pytest.approx(REPEAT_PENALTY) for s in last)


def test_two_requests_are_decoded_together(server):
    """Two requests in flight occupy both slots at once (llama-cpp-python's server would queue one)."""
    async def go():
        async with httpx.AsyncClient(timeout=120) as http:
            async def one(topic: str):
                body = {"model": server.served_model, "temperature": 0.0, "max_tokens": 96, **server.extra_body,
                        "messages": [{"role": "user", "content": f"Write a long story about {topic}."}]}
                (await http.post(f"{server.base_url}/chat/completions", json=body)).raise_for_status()

            async def watch(done: asyncio.Event) -> int:
                most = 0
                while not done.is_set():
                    slots = (await http.get(f"{root(server)}/slots")).json()
                    most = max(most, sum(s["is_processing"] for s in slots))
                    await asyncio.sleep(0.05)
                return most

            done = asyncio.Event()
            watcher = asyncio.create_task(watch(done))
            await asyncio.gather(one("a lighthouse"), one("a bakery"))
            done.set()
            return await watcher

    assert asyncio.run(go()) == 2


def test_a_shared_prefix_is_taken_from_the_cache_not_prefilled_again(server):
    first = chat(server, shopper("running shoes"), id_slot=0)
    assert first["timings"]["cache_n"] == 0 or first["timings"]["prompt_n"] > 500
    # the same slot: the shared history stays in its KV cache; only the tail is computed
    second = chat(server, shopper("a rain jacket"), id_slot=0)
    prompt = second["usage"]["prompt_tokens"]
    assert second["timings"]["cache_n"] > 0.9 * prompt and second["timings"]["prompt_n"] < 0.1 * prompt
    # another prompt takes the slot; the history comes back from the host-memory prompt cache
    chat(server, [{"role": "user", "content": "Name a colour. " * 50}], id_slot=0)
    time.sleep(0.2)
    third = chat(server, shopper("hiking socks"), id_slot=0)
    assert third["timings"]["cache_n"] > 0.9 * third["usage"]["prompt_tokens"], third["timings"]


# prompts whose answers repeat what the prompt ends with: where a repeat penalty over the prompt's last tokens
# (llama-server unpatched) and one over the generated tokens only (llama-cpp-python) part ways
ECHO = ["Say the word banana five times: banana banana banana", "Count: one, two, three, four, five, six,",
        "Is Paris in France? Answer in JSON with a verdict and a reason."]


def test_both_embedded_servers_give_the_same_answers(server, tmp_path):
    """The request cache holds answers of either server, so both must answer a request alike at temperature 0:
    the same sampling (repeat penalty over generated tokens only: infra/llama-server/build.py PATCHES), the same
    numerics (flash attention off), the same constraint on a schema (the GBNF llama-cpp-python makes of it)."""
    def answers(endpoint) -> list[str]:
        client = LLMClient(endpoint, Sampling(max_tokens=32), RequestCache(tmp_path / f"{endpoint.kind}-{id(endpoint)}.sqlite"),
                           role="agent", run_id="r", seed=3)

        async def ask():
            try:
                texts = [(await client.chat([{"role": "user", "content": p}])).text for p in ECHO]
                verdict = await client.chat([{"role": "user", "content": ECHO[-1]}], json_schema=VERDICT)
                return texts + [verdict.text]
            finally:
                await client.aclose()
        return asyncio.run(ask())

    with Deployment(MODEL, OTHER, tmp_path / "logs") as other:
        theirs = answers(other)
    mine = answers(server)
    assert all(theirs) and mine == theirs


def test_a_verdict_without_its_reason_is_the_same_verdict_and_p_true_in_a_few_tokens(server, tmp_path):
    """`reasons: false` (the quickstart's judge): the same messages, the reason dropped from the schema. P(true) is
    read at the verdict token, which comes before the reason either way, so it must not move."""
    from perseval.judges.binary import binary_verdict
    from perseval.benchmarks.action_judges import judge_messages

    client = LLMClient(server, Sampling(max_tokens=96, temperature=0.0), RequestCache(tmp_path / "c.sqlite"),
                       role="judge", run_id="r", seed=3)
    cases = [("Plan my week.", "Monday: gym at 7. Tuesday: team meeting.", "Mentions the gym on Monday"),
             ("Suggest a laptop.", "A heavy gaming laptop.", "The user wants a light laptop for travel"),
             ("Write a toast.", "", "Mentions the bride's name, Ana")]

    async def ask(reasons: bool):
        return [await binary_verdict(client, judge_messages(q, a, c, 2000), quoted=[a], reasons=reasons)
                for q, a, c in cases]

    async def both():
        try:
            return await ask(True), await ask(False)
        finally:
            await client.aclose()

    full, bare = asyncio.run(both())
    assert all(v.method == "logprobs" for v in full + bare), [(v.status, v.raw) for v in full + bare]
    # the same request sent twice moves P(true) by up to 0.006 on this server (slot and prompt-cache numerics,
    # measured 2026-12-04): the reason's absence must move it no more than that
    assert [v.p_true for v in bare] == pytest.approx([v.p_true for v in full], abs=0.01)
    assert [v.score for v in bare] == [v.score for v in full]
    assert all("reason" in json.loads(v.raw) for v in full) and not any("reason" in json.loads(v.raw) for v in bare)
