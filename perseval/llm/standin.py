"""An instant OpenAI-compatible server on 127.0.0.1, for measuring the pipeline without a model.

It speaks HTTP like vLLM's server does (an ASGI app under uvicorn: `POST /v1/chat/completions`,
`GET /v1/models`, `GET /health`), answers at once or after a set latency, and its answers are fixed by the
request: the same messages get the same answer, different ones differ. An answer asked for with a JSON schema
(`response_format` of type `json_schema`, or `json_object` with `schema`) is an instance of that schema; one
that asks for `logprobs` gets per-token log-probabilities with `top_logprobs` alternatives, where a boolean
value's token carries both `true` and `false` (what perseval's P(true) reader looks for). It is not a mock of
perseval's client: anything that talks to vLLM can talk to it, and the bench (scripts/bench_scale.py) and the
tests start it as a process of its own:

    python -m perseval.llm.standin --port 8011 [--latency-ms 20] [--model stand-in]
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

import httpx

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_DEPTH = 12  # a recursive schema ($ref to itself) stops here with the smallest value of its type


def _digest(obj: Any) -> int:
    return int.from_bytes(hashlib.blake2b(json.dumps(obj, sort_keys=True).encode(), digest_size=8).digest(), "big")


class SchemaInstance:
    """The smallest JSON value that satisfies a JSON schema (the subset structured-output servers accept:
    type, properties/required, items/minItems, enum, const, anyOf/oneOf/allOf, $ref to $defs/definitions,
    minimum, minLength), with free choices (a boolean, an enum member, a string) drawn from `seed`."""

    def __init__(self, root: dict[str, Any], seed: int):
        self.root, self.seed = root, seed

    def _pick(self, n: int, salt: str) -> int:
        return _digest([self.seed, salt]) % n if n else 0

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return {**node, **{k: v for k, v in schema.items() if k != "$ref"}}

    def value(self, schema: Any, path: str = "$", depth: int = 0) -> Any:
        if not isinstance(schema, dict):
            return None
        schema = self._resolve(schema)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][self._pick(len(schema["enum"]), path)]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.value(schema[key][0], path, depth + 1)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged |= self._resolve(part)
            return self.value(merged, path, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        return self._typed(kind, schema, path, depth)

    def _typed(self, kind: str, schema: dict[str, Any], path: str, depth: int) -> Any:
        if kind == "object":
            props = schema.get("properties") or {}
            return {} if depth > MAX_DEPTH else {k: self.value(v, f"{path}.{k}", depth + 1) for k, v in props.items()}
        if kind == "array":
            n = 0 if depth > MAX_DEPTH else max(int(schema.get("minItems", 1)), 1)
            n = min(n, int(schema.get("maxItems", n)))
            return [self.value(schema.get("items", {}), f"{path}[{i}]", depth + 1) for i in range(n)]
        if kind == "boolean":
            return bool(self._pick(2, path))
        if kind in ("integer", "number"):
            low = schema["minimum"] if "minimum" in schema else schema.get("exclusiveMinimum", -1) + 1
            high = schema["maximum"] if "maximum" in schema else schema.get("exclusiveMaximum", low + 5) - 1
            high = max(high, low)
            pick = low + self._pick(int(high - low) + 1, path)
            return int(pick) if kind == "integer" else float(pick)
        if kind == "null":
            return None
        text = f"stand-in {path.rsplit('.', 1)[-1]} {self._pick(997, path)}"
        return text.ljust(int(schema.get("minLength", 0)), "x")[: int(schema.get("maxLength", 10 ** 6))]


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    if fmt.get("type") == "json_object":
        return fmt.get("schema") or {}
    return None


def answer_text(body: dict[str, Any]) -> str:
    """The answer to a chat request: a schema instance as JSON, or a short text fixed by the messages."""
    seed = _digest(body.get("messages"))
    schema = requested_schema(body)
    if schema is not None:
        return json.dumps(SchemaInstance(schema, seed).value(schema))
    return f"A stand-in answer ({seed % 9973})."


def _tokens(text: str) -> list[str]:
    """Word-and-punctuation pieces that join back to `text` (a JSON literal true/false is its own piece)."""
    out, cur = [], ""
    for ch in text:
        if ch.isalnum() or ch == "_":
            cur += ch
            continue
        if cur:
            out.append(cur)
            cur = ""
        out.append(ch)
    return out + ([cur] if cur else [])


def logprob_content(text: str, top: int, seed: int) -> list[dict[str, Any]]:
    """OpenAI's `logprobs.content` for `text`: the chosen token most likely, and for a boolean both words."""
    content = []
    for i, tok in enumerate(_tokens(text)):
        p = 0.55 + 0.44 * ((_digest([seed, i]) % 1000) / 1000)  # the chosen token's probability, in [0.55, 0.99)
        alts = {tok: math.log(p)}
        if tok in ("true", "false"):
            alts["false" if tok == "true" else "true"] = math.log(1 - p)
        content.append({"token": tok, "logprob": alts[tok], "bytes": list(tok.encode()),
                        "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                         for t, lp in list(alts.items())[:max(top, 1)]]})
    return content


def completion(body: dict[str, Any], model: str) -> dict[str, Any]:
    text = answer_text(body)
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    if body.get("logprobs"):
        choice["logprobs"] = {"content": logprob_content(text, int(body.get("top_logprobs") or 1),
                                                         _digest(body.get("messages")))}
    n_out = len(_tokens(text))
    return {"id": f"chatcmpl-{_digest(body) % 10 ** 12}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or model, "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n_out,
                      "total_tokens": prompt_tokens + n_out}}


class StandIn:
    """The ASGI app. `latency_s`: how long each completion waits before it answers (0: at once)."""

    def __init__(self, model: str = "stand-in", latency_s: float = 0.0):
        self.model, self.latency_s = model, latency_s
        self.served = 0  # completions answered, shown by GET /stats
        self.in_flight = self.peak_in_flight = 0  # completions being answered at once (now, at most)
        self.clients: set[tuple[str, int]] = set()  # the client connections (address, port) completions came on

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method == "POST" and path.endswith("/chat/completions"):
            self.clients.add(tuple(scope.get("client") or ("", 0)))
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                await self._complete(receive, send)
            finally:
                self.in_flight -= 1
        elif method == "GET" and path in ("/health", "/v1/health"):
            await _reply(send, 200, {"status": "ok"})
        elif method == "GET" and path.endswith("/models"):
            await _reply(send, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        elif method == "GET" and path == "/stats":
            await _reply(send, 200, {"served": self.served, "peak_in_flight": self.peak_in_flight,
                                     "connections": len(self.clients)})
        else:
            await _reply(send, 404, {"error": {"message": f"no route {method} {path}"}})

    async def _complete(self, receive: Receive, send: Send) -> None:
        raw = b""
        while True:
            msg = await receive()
            raw += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        try:
            body = json.loads(raw)
        except ValueError:
            await _reply(send, 400, {"error": {"message": "the body is not JSON"}})
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            await _reply(send, 400, {"error": {"message": "a chat completion needs a list of messages"}})
            return
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self.served += 1
        await _reply(send, 200, completion(body, self.model))


async def _reply(send: Send, status: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def standin_process(latency_ms: float = 0.0, model: str = "stand-in", start_timeout_s: float = 30.0) -> Iterator[str]:
    """The stand-in as a process of its own on a free loopback port, for as long as the block runs; yields its
    base URL (add /v1 for an OpenAI client). Stopped (terminated, then killed) on the way out."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "perseval.llm.standin", "--port", str(port), "--model", model,
                             "--latency-ms", str(latency_ms)])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stand-in server did not answer {url}/health (exit {proc.poll()})")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--model", default="stand-in", help="the name GET /v1/models lists")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="how long each completion waits before it answers")
    args = ap.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("the stand-in listens on the loopback interface only")
    uvicorn.run(StandIn(args.model, args.latency_ms / 1000), host=args.host, port=args.port, log_level="warning",
                access_log=False, lifespan="on")


if __name__ == "__main__":
    main()
