"""One async OpenAI-compatible client for agents and judges.

Bounded concurrency per deployment, retries with exponential backoff on
transient errors (the openai SDK's), timeouts, structured output in the
dialect the deployment sets (by default the one its kind accepts), token
counts, and the persistent request cache in front of it all. A request that
still fails is returned as a failed ChatResult (and logged; a refused key as
`unauthorized`), never raised: failures are data. The key and `Bearer`
tokens are masked in every text it returns (perseval.core.redact).

Nothing is sent twice (single flight per request key): identical requests in flight together, in any thread
of this process, share the one answer of the first, and across the processes that share the request cache the
first to claim a key sends it while the others wait for its answer in the cache. The cache is asked again once
a concurrency slot is taken, so a request queued behind others finds an answer that came meanwhile.

A server perseval started is watched by its pool: once its process has exited,
no client sends it anything more (not a retry, not a queued request: each is
answered `failed` with the one line saying so, unsent), and a client made after
that is refused (ServerExited), which stops the stage that asked for it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import functools
import importlib.util
import json
import os
import ssl
import threading
import time
from contextlib import nullcontext
from typing import Any

import httpx
import openai

from perseval.llm.settings import Sampling, default_dialect
from perseval.llm.usage import Usage
from perseval.llm.base import ChatResult
from perseval.llm.cache import RequestCache, request_key
from perseval.llm.endpoint import Endpoint, server_exit
from perseval.llm.prefix import PrefixGate
from perseval.core.redact import redact, redact_value, secret_from_env

# The request keys of one agent call, in the order it asked them (perseval.pipeline.runner sets a list per
# instance): the run record's per-sample log reads the messages of each from the request cache
SENT: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("perseval_sent", default=None)
CAPTURE_ENV = "PERSEVAL_CAPTURE_REQUESTS"  # a .jsonl path: every request sent is appended there (opt-in)
# the body fields a captured line keeps (with the served model, enough to send the same request again)
CAPTURED_BODY = ("messages", "temperature", "top_p", "max_tokens", "seed", "response_format", "grammar", "tools",
                 "logprobs", "top_logprobs")
NON_OPENAI = ("grammar",)  # body fields the OpenAI SDK has no parameter for: sent as extra body


def response_format(dialect: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` in a deployment's dialect: llama.cpp takes `json_object` + `schema` and rejects `json_schema`;
    vLLM and OpenAI need `json_schema`; `none` sends nothing (the answer is parsed as it comes); `gbnf` sends
    a grammar instead (structured_fields)."""
    if dialect in ("none", "gbnf"):
        return None
    if dialect == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": False}}


@functools.cache
def _converter() -> Any:
    """llama-cpp-python's converter module, loaded from its file (perseval.llm.embedded.grammar_converter)."""
    from perseval.llm.embedded import grammar_converter

    spec = importlib.util.spec_from_file_location("perseval_llama_grammar", grammar_converter())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=256)
def _gbnf(schema_json: str) -> str:
    return _converter().json_schema_to_gbnf(schema_json)


def gbnf(schema: dict[str, Any]) -> str:
    """`schema` as the llama.cpp grammar (GBNF) llama-cpp-python's server makes of it for a `json_object`
    request: sent to llama-server as `grammar`, it constrains an answer exactly as that server did (llama-server's
    own converter allows other whitespace, and answers drift from the ones the request cache holds)."""
    return _gbnf(json.dumps(schema))  # in its own key order: the grammar lists properties in that order


def structured_fields(dialect: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    """The body fields that ask for `schema` in `dialect` (none without a schema)."""
    if schema is None or dialect == "none":
        return {}
    if dialect == "gbnf":
        return {"grammar": gbnf(schema)}
    return {"response_format": response_format(dialect, schema)}


def key_format(kind: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schema as the request cache keys it: in the kind's default dialect whatever the deployment sends,
    because the dialect is a serving choice (like the port) and keys stay those of before the setting."""
    return None if schema is None else response_format(default_dialect(kind), schema)


# The requests being sent by this process, by (cache file, key): every thread's clients join the one in flight.
# A concurrent future (not an asyncio one): in-process runs give each task thread an event loop of its own.
_IN_FLIGHT: dict[tuple[str, str], concurrent.futures.Future] = {}
_IN_FLIGHT_LOCK = threading.Lock()
CLAIM_POLL_S = 0.25  # how often a request another process is sending looks for its answer in the cache


def _join(flight: tuple[str, str]) -> tuple[concurrent.futures.Future, bool]:
    """The future of the request in flight for `flight`, and whether this caller leads (sends) it."""
    with _IN_FLIGHT_LOCK:
        fut = _IN_FLIGHT.get(flight)
        if fut is not None:
            return fut, False
        fut = _IN_FLIGHT[flight] = concurrent.futures.Future()
        return fut, True


def _land(flight: tuple[str, str], fut: concurrent.futures.Future, result: "ChatResult | None") -> None:
    """The leader is done: None (it was abandoned) sends its followers to try again, one of them leading."""
    with _IN_FLIGHT_LOCK:
        if _IN_FLIGHT.get(flight) is fut:
            del _IN_FLIGHT[flight]
    fut.set_result(result)


# Requests in flight per connection pool. httpcore looks at every connection of its pool (is it idle, has it
# expired: a readability poll of its socket) each time a request starts or a response closes, so one pool of
# 64 connections cost more CPU per request than the request itself against a fast server: a client spreads its
# requests over pools of LANE (scripts/bench_client.py, 64 in flight: 7-8 ms of CPU per request in one pool,
# 5-5.7 in pools of 8, 3.6-4.1 in pools of 2, 3.4-4.3 in pools of 1; 2-core machine under load).
LANE = 2
@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's roots, or SSL_CERT_FILE), made once per process: making it loads
    the CA bundle, 48 ms of CPU per client, more than the rest of a client together."""
    return httpx.create_ssl_context()


AUTH_ERRORS = (openai.AuthenticationError, openai.PermissionDeniedError)  # 401, 403: no retry can fix them


def auth_hint(endpoint: Endpoint) -> str:
    """What to fix when an endpoint refuses the key: the variable, and the deployment YAML that names it."""
    where = endpoint.deployment_file or f"the deployment of model {endpoint.name!r}"
    if not endpoint.api_key_env:
        return f"the request carried no key: set api_key_env in {where} to the variable that holds it"
    return f"check the key in ${endpoint.api_key_env} (api_key_env of {where}), or its access to this model"


class LLMClient:
    """A ChatModel bound to one endpoint and one role (agent, judge, construct.<role>).

    Concurrency, timeout and retries come from the deployment (via the endpoint); sampling from the
    role (a backbone's model YAML, a judge's YAML)."""

    def __init__(self, endpoint: Endpoint, sampling: Sampling, cache: RequestCache, *, role: str,
                 run_id: str, seed: int):
        gone = server_exit(endpoint)
        if gone is not None:  # the server died earlier in this run: the stage asking for it stops
            raise gone
        self.name = endpoint.name
        self.endpoint, self.sampling, self.cache = endpoint, sampling, cache
        self.role, self.run_id = role, run_id
        self.seed = sampling.seed if sampling.seed is not None else seed
        # a server with a prefix cache computes a prefix shared by requests in flight together once
        self._gate = PrefixGate() if endpoint.prefix_first else None
        api_key = secret_from_env(endpoint.api_key_env) if endpoint.api_key_env else "not-needed"
        # max_concurrency requests in flight, over lanes of at most LANE: one SDK client (one connection pool)
        # each, a slot naming its lane
        lanes = -(-endpoint.max_concurrency // LANE)
        self._clients = [self._sdk_client(api_key) for _ in range(lanes)]
        self._slots: asyncio.Queue[int] = asyncio.Queue()
        for slot in range(endpoint.max_concurrency):
            self._slots.put_nowait(slot % lanes)
        self.usage = Usage()  # what this client sent and what the cache answered (perseval.pipeline.cost)

    def _sdk_client(self, api_key: str | None) -> openai.AsyncOpenAI:
        # a watched server: every attempt (each of the SDK's retries too) first asks whether it has exited
        hooks = {"request": [self._alive]} if self.endpoint.exit_file else {}
        http = openai.DefaultAsyncHttpxClient(event_hooks=hooks, verify=_tls(), limits=httpx.Limits(
            max_connections=LANE, max_keepalive_connections=LANE))
        return openai.AsyncOpenAI(base_url=self.endpoint.base_url, api_key=api_key or "missing",
                                  timeout=self.endpoint.timeout_s, max_retries=self.endpoint.retries, http_client=http)

    def _request(self, messages: list[dict[str, Any]], json_schema: dict[str, Any] | None, max_tokens: int | None,
                 temperature: float | None, repeat: int, tools: list[dict[str, Any]] | None,
                 logprobs: int | None = None) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.endpoint.served_model, "messages": messages,
            "temperature": self.sampling.temperature if temperature is None else temperature,
            "top_p": self.sampling.top_p, "max_tokens": max_tokens or self.sampling.max_tokens,
            # a distinct seed per repeat, so repeated judgments at temperature > 0 are independent draws
            "seed": self.seed + repeat,
        }
        req.update(structured_fields(self.endpoint.dialect(), json_schema))
        if tools:
            req["tools"] = tools
        req.update(logprob_fields(logprobs))
        return req

    async def chat(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None,
                   max_tokens: int | None = None, temperature: float | None = None, repeat: int = 0,
                   tools: list[dict[str, Any]] | None = None, logprobs: int | None = None) -> ChatResult:
        req = self._request(messages, json_schema, max_tokens, temperature, repeat, tools, logprobs)
        sampling = {k: req[k] for k in ("temperature", "top_p", "max_tokens")}
        key = request_key(self.endpoint.identity, messages, sampling, req["seed"], repeat,
                          {"response_format": key_format(self.endpoint.kind, json_schema), "tools": tools,
                           **logprob_fields(logprobs)})
        if (sent := SENT.get()) is not None:
            sent.append(key)
        result = self._cached(key)
        flight = (str(self.cache.path.resolve()), key)
        while result is None:
            fut, leader = _join(flight)
            if not leader:  # the same request is in flight: its answer is this one's too
                shared = await asyncio.wrap_future(fut)
                result = None if shared is None else dataclasses.replace(shared, cached=shared.status == "ok",
                                                                         latency_s=0.0 if shared.status != "ok"
                                                                         else shared.latency_s)
                if result is not None:
                    self.usage.record(result)
                continue
            answer = None
            try:
                answer = result = await self._lead(req, key, json_schema, messages)
            finally:
                _land(flight, fut, answer)
        return result

    def _cached(self, key: str) -> ChatResult | None:
        """The request cache's answer to `key` (counted as a cache hit), or None."""
        hit = self.cache.get(key)
        if hit is None:
            return None
        hit.pop("messages", None)  # what was sent, kept beside the answer for the per-sample log
        result = ChatResult(**hit, cached=True)
        self.usage.record(result)
        return result

    def _stale_s(self) -> float:
        """How old another host's claim on a key may be before it is taken over: every try of it timed out."""
        return self.endpoint.timeout_s * (self.endpoint.retries + 1) + 60.0

    async def _lead(self, req: dict[str, Any], key: str, schema: dict[str, Any] | None,
                    messages: list[dict[str, Any]]) -> ChatResult:
        """Send `key` unless the cache answers it meanwhile: another process's claim is waited out first, and the
        cache is asked again once a slot is taken (a queued request finds an answer that came while it waited)."""
        while not self.cache.claim(key, self._stale_s()):  # another of the run's processes is sending it
            while self.cache.claimed(key, self._stale_s()):
                await asyncio.sleep(CLAIM_POLL_S)
            hit = self._cached(key)
            if hit is not None:
                return hit
        settled = False  # _send's one write stores the answer, logs the request and drops the claim together
        try:
            async with self._gate.turn(json.dumps(messages, ensure_ascii=False)) if self._gate else nullcontext():
                lane = await self._slots.get()
                try:
                    hit = self._cached(key)
                    if hit is not None:
                        return hit
                    gone = server_exit(self.endpoint)
                    if gone is not None:  # not sent, not counted: no request reaches a dead server's port
                        return ChatResult(text="", status="failed", error=redact(f"not sent: {gone}")[:2000])
                    result = await self._send(self._clients[lane], req, key, schema)
                    settled = True
                    return result
                finally:
                    self._slots.put_nowait(lane)
        finally:
            if not settled:
                self.cache.unclaim(key)

    async def _alive(self, request: httpx.Request) -> None:
        """httpx's request hook: an attempt to a server that has exited is not made (a connection error)."""
        gone = server_exit(self.endpoint)
        if gone is not None:
            raise httpx.ConnectError(f"not sent: {gone}", request=request)

    async def _send(self, client: openai.AsyncOpenAI, req: dict[str, Any], key: str,
                    schema: dict[str, Any] | None) -> ChatResult:
        start = time.monotonic()
        try:
            params = {k: v for k, v in req.items() if k not in NON_OPENAI}
            extra = {**self.endpoint.extra_body, **{k: req[k] for k in NON_OPENAI if k in req}}
            resp = await client.chat.completions.create(**params, extra_body=extra or None)
        except openai.OpenAIError as exc:  # retries are exhausted by now
            error, status = f"{type(exc).__name__}: {exc}", "failed"
            if isinstance(exc, AUTH_ERRORS):  # logged apart: the run's summary says what to fix, not "again"
                error, status = f"authentication failed (HTTP {exc.status_code}): {auth_hint(self.endpoint)}; " \
                                f"{error}", "unauthorized"
            elif isinstance(exc, openai.APIConnectionError):  # the SDK's text names no address
                error += f" (no answer from {self.endpoint.base_url})"
                gone = server_exit(self.endpoint)
                if gone is not None:  # sent before its server was seen to exit; its retries were not
                    error += f"; {gone}"
            failed = ChatResult(text="", status="failed", error=redact(error)[:2000],
                                latency_s=time.monotonic() - start)
            self.usage.record(failed)
            self.cache.settle(key, self.endpoint.identity, None,
                              (self.run_id, self.role, status, 0, 0, failed.latency_s))
            self._capture(req, key, failed, schema)
            return failed
        result = _to_result(resp)
        result.latency_s = time.monotonic() - start
        self.usage.record(result)
        self.cache.settle(key, self.endpoint.identity, _cacheable(result) | {"messages": req["messages"]},
                          (self.run_id, self.role, "ok", result.prompt_tokens, result.completion_tokens,
                           result.latency_s))
        self._capture(req, key, result, schema)
        return result

    def _capture(self, req: dict[str, Any], key: str, result: ChatResult, schema: dict[str, Any] | None) -> None:
        """With PERSEVAL_CAPTURE_REQUESTS set: the request as sent, for replaying it without the pipeline."""
        path = os.environ.get(CAPTURE_ENV)
        if path:
            append_jsonl(path, capture_record(self.role, self.endpoint, req, result, key, schema))

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()
        self.cache.flush(final=True)  # answers a full disk kept from the cache: written now, or said


def logprob_fields(top: int | None) -> dict[str, Any]:
    """The body fields that ask for the top `top` alternatives of every generated token, in the OpenAI chat
    form that llama-server, llama-cpp-python's server and vLLM accept too; none when `top` is None (so the
    requests and cache keys of every caller that does not ask stay as they were)."""
    return {} if top is None else {"logprobs": True, "top_logprobs": top}


def token_logprobs(choice: Any) -> list[dict[str, Any]] | None:
    """[{token, logprob, top: {token: logprob}}] of the choice's generated tokens; None when the server sent
    no probabilities (a server that ignores `logprobs`, or a request that did not ask)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [{"token": t.token, "logprob": t.logprob,
             "top": {a.token: a.logprob for a in (t.top_logprobs or [])}} for t in content]


def _to_result(resp: Any) -> ChatResult:
    choice = resp.choices[0]
    msg = choice.message
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in (msg.tool_calls or [])]
    usage = resp.usage
    return ChatResult(text=redact(msg.content or ""), prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                      completion_tokens=getattr(usage, "completion_tokens", 0) or 0, tool_calls=redact_value(calls),
                      token_logprobs=token_logprobs(choice))


def _cacheable(result: ChatResult) -> dict[str, Any]:
    kept = {"text": result.text, "status": result.status, "error": result.error,
            "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "tool_calls": result.tool_calls, "latency_s": round(result.latency_s, 4)}
    if result.token_logprobs is not None:  # only asked-for probabilities: cached answers of before stay equal
        kept["token_logprobs"] = result.token_logprobs
    return kept


def capture_record(stage: str, endpoint: Endpoint, req: dict[str, Any], result: ChatResult,
                   key: str | None = None, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """One sent request: the body as the server got it (no headers, so no API key), the server's own fields
    and the JSON schema apart (`extra`, `json_schema`: a replay to another server leaves the first out and asks
    for the second in its dialect), its request-cache key (which finds its answer in the cache) and what it
    cost. Texts are redacted like every stored text: a prompt may quote an error that echoed an API key."""
    body = {k: req.get(k) for k in CAPTURED_BODY}
    return {"stage": stage, "model": endpoint.name, "kind": endpoint.kind, "served_model": req["model"],
            **redact_value(body), "json_schema": schema, "extra": endpoint.extra_body, "cache_key": key,
            "status": result.status,
            "latency_s": round(result.latency_s, 4), "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens}


def append_jsonl(path: str, record: dict[str, Any]) -> None:
    """One line per write(2) on an O_APPEND descriptor: lines of concurrent threads and processes never mix."""
    line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
