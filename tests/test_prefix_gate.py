"""Requests sharing a long prompt prefix go one after another, in the order asked, while others go at once
(perseval.llm.prefix); through the client, against a real HTTP server that records when each arrived."""
from __future__ import annotations

import asyncio
import threading
import time

from perseval.llm.settings import Sampling
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.llm.prefix import MIN_CHARS, PrefixGate
from tests.http_stub import JsonHandler, completion, serve

SHARED = "Task: plan a week of dinners. Response: " + "a long response to judge, " * 40


class Trace:
    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.order: list[str] = []


def run(gate: PrefixGate, prompts: dict[str, str], trace: Trace, fail: set[str] = frozenset()):
    async def one(name: str, prompt: str):
        async with gate.turn(prompt):
            trace.order.append(f"+{name}")
            trace.inside += 1
            trace.most = max(trace.most, trace.inside)
            await asyncio.sleep(0.05)
            trace.inside -= 1
            trace.order.append(f"-{name}")
            if name in fail:
                raise RuntimeError(name)

    async def go():
        return await asyncio.gather(*(one(n, p) for n, p in prompts.items()), return_exceptions=True)
    return asyncio.run(go())


def test_prompts_sharing_a_prefix_go_in_turn_in_the_order_asked():
    trace = Trace()
    run(PrefixGate(), {f"c{i}": f"{SHARED} Requirement {i}: vegetarian?" for i in range(4)}, trace)
    assert trace.order == ["+c0", "-c0", "+c1", "-c1", "+c2", "-c2", "+c3", "-c3"] and trace.most == 1


def test_unrelated_and_short_prompts_never_wait():
    trace = Trace()
    prompts = {"a": "x" * 2000, "b": "y" * 2000, "s1": "short", "s2": "short too",
               "a2": "x" * 300 + "z" * 1700}  # shares 300 characters with a: under half of it
    run(PrefixGate(), prompts, trace)
    assert trace.most == 5 and len("short too") < MIN_CHARS


def test_two_prefixes_each_in_turn_side_by_side_and_a_failure_passes_the_turn_on():
    trace = Trace()
    prompts = {"a0": f"{SHARED} a0", "b0": "B" * 1000 + " b0", "a1": f"{SHARED} a1", "b1": "B" * 1000 + " b1"}
    out = run(PrefixGate(), prompts, trace, fail={"a0"})
    assert isinstance(out[0], RuntimeError) and trace.most == 2
    assert trace.order.index("-a0") < trace.order.index("+a1") and trace.order.index("-b0") < trace.order.index("+b1")


def test_the_client_sends_prompts_sharing_a_prefix_in_turn(tmp_path):
    arrivals: list[tuple[float, str, str]] = []
    lock = threading.Lock()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.request_json()
            tail = body["messages"][-1]["content"][-13:]
            with lock:
                arrivals.append((time.monotonic(), "in", tail))
            time.sleep(0.2)
            with lock:
                arrivals.append((time.monotonic(), "out", tail))
            self.reply(200, completion("ok"))

    with serve(Handler) as url:
        endpoint = Endpoint("m", "embedded", f"{url}/v1", "m", "gguf:x", None, 4, 10.0, 0, prefix_first=True)
        client = LLMClient(endpoint, Sampling(max_tokens=4), RequestCache(tmp_path / "c.sqlite"), role="judge",
                           run_id="r", seed=1)

        async def go():
            try:
                asks = [[{"role": "user", "content": f"{SHARED} checkpoint {i:02d}"}] for i in range(4)]
                return await asyncio.gather(*(client.chat(m) for m in asks))
            finally:
                await client.aclose()

        results = asyncio.run(go())
    assert all(r.status == "ok" for r in results)
    events = [(kind, tail) for _, kind, tail in sorted(arrivals)]
    assert events == [(k, f"checkpoint 0{i}") for i in range(4) for k in ("in", "out")]  # in turn, in order


def test_without_the_gate_all_go_at_once(tmp_path):
    inside, most = [0], [0]
    lock = threading.Lock()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            self.request_json()
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.2)
            with lock:
                inside[0] -= 1
            self.reply(200, completion("ok"))

    with serve(Handler) as url:
        endpoint = Endpoint("m", "vllm", f"{url}/v1", "m", "hf:x", None, 4, 10.0, 0)  # prefix_first off
        client = LLMClient(endpoint, Sampling(max_tokens=4), RequestCache(tmp_path / "c.sqlite"), role="judge",
                           run_id="r", seed=1)

        async def go():
            try:
                return await asyncio.gather(*(client.chat([{"role": "user", "content": f"{SHARED} {i}"}])
                                              for i in range(4)))
            finally:
                await client.aclose()
        asyncio.run(go())
    assert most[0] == 4
