"""Search back ends an agent can be bound to (Bespoke's systems answer with search).

- "corpus": dense retrieval over the benchmark's own corpus index (the offline default)
- "gold": the gold-information setting: the instance's gold claims replace search results
- "none": no search
- {"kind": "http", ...}: a web-search HTTP API the user configures (URL, key variable, JSON paths)
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

import httpx
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from perseval.core.errors import ConfigError
from perseval.core.instances import CORPUS_OWNER, Instance, Passage
from perseval.core.redact import redact, secret_from_env

Search = Callable[[Instance, str, int], Awaitable[list[Passage]]]


class SearchError(RuntimeError):
    """A web search that still failed after its retries (the message is redacted)."""

TRANSIENT = (httpx.TransportError, httpx.HTTPStatusError)


def gold_search(gold_of: Callable[[str], dict[str, Any]]) -> Search:
    async def search(inst: Instance, query: str, k: int) -> list[Passage]:
        claims = gold_of(inst.instance_id).get("claims", [])
        return [Passage(f"gold-{i}", 0, str(c), 1.0) for i, c in enumerate(claims[:k] if k else claims)]

    return search


def corpus_search(retrieve: Callable[[str, str, int], list[Passage]]) -> Search:
    async def search(inst: Instance, query: str, k: int) -> list[Passage]:
        return retrieve(CORPUS_OWNER, query, k)

    return search


def _dig(obj: Any, path: str) -> Any:
    for part in filter(None, path.split(".")):
        obj = obj.get(part, []) if isinstance(obj, dict) else []
    return obj


def http_search(cfg: dict[str, Any]) -> Search:
    """GET <url>?<query_param>=...&<count_param>=k; results at `results_path`, text from `text_fields`.

    The API key is read from the variable `api_key_env` and sent in `key_header` (default
    Authorization: Bearer ...); it is never stored or logged: it is masked in errors and results.
    """
    if not cfg.get("url"):
        raise ConfigError("search: an http back end needs `url`")
    query_param, count_param = cfg.get("query_param", "q"), cfg.get("count_param", "count")
    results_path = cfg.get("results_path", "results")
    text_fields = list(cfg.get("text_fields", ["snippet", "content", "text", "description"]))
    timeout = float(cfg.get("timeout_s", 30))

    def headers() -> dict[str, str]:
        env = cfg.get("api_key_env")
        if not env:
            return {}
        key = secret_from_env(env)
        header = cfg.get("key_header", "Authorization")
        return {header: f"Bearer {key}" if header == "Authorization" else key}

    @retry(retry=retry_if_exception_type(TRANSIENT), stop=stop_after_attempt(int(cfg.get("retries", 3))),
           wait=wait_exponential(multiplier=0.5, max=8), reraise=True)
    async def fetch(query: str, k: int) -> Any:
        async with httpx.AsyncClient(timeout=timeout) as client:
            resp = await client.get(cfg["url"], params={query_param: query, count_param: k}, headers=headers())
            resp.raise_for_status()
            return resp.json()

    async def search(inst: Instance, query: str, k: int) -> list[Passage]:
        try:
            found = await fetch(query, k)
        except httpx.HTTPError as exc:  # the error text may carry the key (an echoing endpoint)
            body = exc.response.text[:500] if isinstance(exc, httpx.HTTPStatusError) else ""
            raise SearchError(redact(f"search failed: {type(exc).__name__}: {exc} {body}".strip())) from None
        items = _dig(found, results_path)
        out = []
        for i, item in enumerate(items[:k] if k else items):
            text = next((str(item[f]) for f in text_fields if isinstance(item, dict) and item.get(f)), "")
            title = str(item.get("title", "")) if isinstance(item, dict) else ""
            doc_id = str(item.get("url", f"web-{i}")) if isinstance(item, dict) else f"web-{i}"
            out.append(Passage(redact(doc_id), 0, redact(f"{title}: {text}" if title else text), 1.0 / (i + 1)))
        return out

    return search


def make_search(mode: str | dict[str, Any], *, has_corpus: bool, retrieve: Callable[[str, str, int], list[Passage]],
                gold_of: Callable[[str], dict[str, Any]]) -> Search | None:
    """The search an agent's `search:` param asks for (None: no search)."""
    if isinstance(mode, dict):
        if mode.get("kind") != "http":
            raise ConfigError(f"search: unknown back end {mode.get('kind')!r} (known: corpus, gold, none, http)")
        return http_search(mode)
    if mode == "gold":
        return gold_search(gold_of)
    if mode == "corpus":
        return corpus_search(retrieve) if has_corpus else None
    if mode == "none":
        return None
    raise ConfigError(f"search: unknown back end {mode!r} (known: corpus, gold, none, http)")
