"""Captured requests sent again, straight to a server: what the requests of a run cost without the run.

A capture (PERSEVAL_CAPTURE_REQUESTS, perseval.llm.client.capture_record) holds each request as sent. A
replay sends them to a live endpoint at a given concurrency, in the captured order or grouped by shared
prompt prefix, and keeps what each answer was and cost: the text, the tokens, and, from llama-server, how
much of the prompt it took from its cache (`timings.cache_n`) and how much it computed (`prompt_n`). The
benchmarks (scripts/bench_servers.py, scripts/bench_pipeline.py) compare servers, concurrency levels and
orders with it; nothing in a run uses it.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

import httpx

from perseval.llm.client import CAPTURED_BODY, structured_fields
from perseval.llm.endpoint import Endpoint
from perseval.core.redact import secret_from_env

STAGE_OF_ROLE = {"agent": "run", "judge": "judge"}  # a client's role -> the flow's stage that holds it
Order = Literal["captured", "prefix", "prefix-slot"]
ORDERS = ("captured", "prefix", "prefix-slot")


def stage_of(role: str) -> str:
    return "construct" if role.startswith("construct.") else STAGE_OF_ROLE.get(role, role)


def read_capture(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def by_stage(requests: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Requests per flow stage, stages in the order a run reaches them."""
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in requests:
        out.setdefault(stage_of(rec["stage"]), []).append(rec)
    rank = {"construct": 0, "run": 1, "judge": 2}
    return dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], 3)))


def schema_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a captured request asked for (captures before `json_schema` was kept: from its
    response_format)."""
    if rec.get("json_schema") is not None:
        return rec["json_schema"]
    fmt = rec.get("response_format") or {}
    return fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")


def body(rec: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
    """The captured request as `endpoint` takes it: its served name, the JSON schema in its dialect and its
    own extra fields (the captured server's structured-output fields and extras left out)."""
    kept = {k: rec[k] for k in CAPTURED_BODY if rec.get(k) is not None and k not in ("response_format", "grammar")}
    return {"model": endpoint.served_model, **kept, **structured_fields(endpoint.dialect(), schema_of(rec)),
            **endpoint.extra_body}


@dataclass
class Answer:
    """One replayed request: its answer and what it cost."""

    index: int  # its place in the capture
    text: str
    status: str
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_n: int | None = None  # llama-server: prompt tokens taken from its caches
    prompt_n: int | None = None  # llama-server: prompt tokens it computed
    prompt_ms: float | None = None
    predicted_ms: float | None = None


def answer_text(data: dict[str, Any]) -> str:
    """What a client reads of an answer: the message text and any tool calls, as one comparable string."""
    msg = data["choices"][0]["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]
    return (msg.get("content") or "") + (json.dumps(calls) if calls else "")


def _answer(index: int, data: dict[str, Any], latency: float) -> Answer:
    usage, timings = data.get("usage") or {}, data.get("timings") or {}
    return Answer(index, answer_text(data), "ok", latency, usage.get("prompt_tokens", 0),
                  usage.get("completion_tokens", 0), timings.get("cache_n"), timings.get("prompt_n"),
                  timings.get("prompt_ms"), timings.get("predicted_ms"))


def prompt_text(rec: dict[str, Any]) -> str:
    return json.dumps(rec["messages"], ensure_ascii=False)


def prefix_groups(requests: list[dict[str, Any]], share: float = 0.5) -> list[list[int]]:
    """Indices of `requests` grouped by shared prompt prefix: sorted by prompt text (a shared prefix sorts
    together), a request joins the group before it when its prompt shares at least `share` of the shorter
    prompt with the one before it. Groups are listed in the order their first request was captured."""
    texts = [prompt_text(r) for r in requests]
    order = sorted(range(len(texts)), key=lambda i: texts[i])
    groups: list[list[int]] = []
    for i in order:
        prev = groups[-1][-1] if groups else None
        shared = len(os.path.commonprefix([texts[prev], texts[i]])) if prev is not None else 0
        if prev is not None and shared >= share * min(len(texts[prev]), len(texts[i])):
            groups[-1].append(i)
        else:
            groups.append([i])
    for g in groups:
        g.sort()
    return sorted(groups, key=lambda g: g[0])


@dataclass
class Replay:
    """The answers of one replay and its wall time."""

    wall_s: float
    answers: list[Answer] = field(default_factory=list)


async def replay(requests: list[dict[str, Any]], endpoint: Endpoint, concurrency: int, order: Order = "captured",
                 slots: int | None = None) -> Replay:
    """Send `requests` to `endpoint` with at most `concurrency` in flight.

    captured: in the captured order, all at once. prefix: the requests that share a prompt prefix
    (prefix_groups) go one after another, groups side by side, as perseval.llm.prefix sends them in a run:
    each finds the prefix in the slot the one before it left (llama-server picks the idle slot with the
    longest shared prefix). prefix-slot: the same, each group pinned to one slot (`id_slot`, group n to
    slot n mod `slots`)."""
    sem = asyncio.Semaphore(concurrency)
    key = secret_from_env(endpoint.api_key_env) if endpoint.api_key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    answers: list[Answer] = []

    async def send(http: httpx.AsyncClient, i: int, slot: int | None = None) -> None:
        payload = body(requests[i], endpoint)
        if slot is not None:
            payload["id_slot"] = slot
        async with sem:
            t = time.monotonic()
            try:
                resp = await http.post(f"{endpoint.base_url}/chat/completions", json=payload, headers=headers)
                resp.raise_for_status()
                answers.append(_answer(i, resp.json(), time.monotonic() - t))
            except httpx.HTTPError as exc:
                answers.append(Answer(i, f"{type(exc).__name__}: {exc}", "failed", time.monotonic() - t))

    async def in_turn(http: httpx.AsyncClient, members: list[int], slot: int | None = None) -> None:
        for i in members:
            await send(http, i, slot)

    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=endpoint.timeout_s) as http:
        if order == "captured":
            await asyncio.gather(*(send(http, i) for i in range(len(requests))))
        elif order == "prefix":
            await asyncio.gather(*(in_turn(http, g) for g in prefix_groups(requests)))
        else:
            groups = prefix_groups(requests)
            await asyncio.gather(*(in_turn(http, g, n % (slots or 1)) for n, g in enumerate(groups)))
    return Replay(time.monotonic() - t0, sorted(answers, key=lambda a: a.index))
