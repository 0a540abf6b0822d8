"""One probe request to an existing endpoint when its deployment starts: does it take the key and the
structured-output dialect the deployment sends?

An `openai` deployment starts no server, so nothing else tells, before the first agent request, that the
key is wrong or that the server answers 500 to every `json_schema` request (llama.cpp's own server and
several hosted ones take only `json_object`). The probe is a tiny structured request sent straight over
HTTP: not through the client, so it is no request of the run (no cache entry, no count). A refused key or
a refused dialect stops the start with a line naming the deployment YAML, the key and what is allowed; an
endpoint that answers nothing at all is left to the run (an outage: its requests fail as data).
"""
from __future__ import annotations

import logging
import os
from typing import Any

import httpx

from perseval.setup.config import STRUCTURED_OUTPUT
from perseval.core.errors import EndpointRefused
from perseval.llm.client import auth_hint, response_format
from perseval.llm.endpoint import Endpoint
from perseval.core.redact import redact, secret_from_env

log = logging.getLogger("perseval.probe")
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
PROBE_TIMEOUT_S = 60.0
AUTH_STATUS = (401, 403)


def _send(ep: Endpoint, dialect: str) -> httpx.Response | None:
    """The probe request in `dialect` (None: the endpoint did not answer at all)."""
    body: dict[str, Any] = {"model": ep.served_model, "max_tokens": 16, "temperature": 0.0,
                            "messages": [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}]}
    fmt = response_format(dialect, PROBE_SCHEMA)
    if fmt is not None:
        body["response_format"] = fmt
    key = secret_from_env(ep.api_key_env) if ep.api_key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        return httpx.post(f"{ep.base_url}/chat/completions", json=body, headers=headers,
                          timeout=min(ep.timeout_s, PROBE_TIMEOUT_S))
    except httpx.HTTPError as exc:
        log.warning("probe of %s: no answer (%s: %s); its requests will fail as data", ep.base_url,
                    type(exc).__name__, exc)
        return None


def _said(resp: httpx.Response) -> str:
    """What the server said, short, with any key it echoed masked."""
    return redact(f"HTTP {resp.status_code}: {' '.join(resp.text.split())[:300]}")


def probe(ep: Endpoint, name: str) -> None:
    """Raise EndpointRefused when `ep` refuses the probe's key or dialect; `name` says which deployment, as
    the health wait does."""
    where = ep.deployment_file or f"the deployment YAML of model {ep.name!r}"
    if ep.api_key_env and not os.environ.get(ep.api_key_env):
        raise EndpointRefused(f"{name}: {where}: key 'api_key_env': ${ep.api_key_env} is not set in this "
                                   "run's environment; export the endpoint's key there")
    dialect = ep.dialect()
    resp = _send(ep, dialect)
    if resp is None or resp.status_code == 200:
        return
    if resp.status_code in AUTH_STATUS:
        raise EndpointRefused(f"{name}: the endpoint {ep.base_url} refused the key ({_said(resp)}): "
                                   f"{auth_hint(ep)}")
    works = [d for d in STRUCTURED_OUTPUT if d != dialect and _accepted(ep, d)]
    if not works:  # it refuses any request, not this dialect: a server error, left to the run
        log.warning("probe of %s: %s with and without response_format", ep.base_url, _said(resp))
        return
    raise EndpointRefused(f"{name}: {where}: key 'structured_output': the endpoint refused structured output "
                          f"as {dialect} ({_said(resp)}) but accepts {works[0]}; set structured_output to one "
                          f"of {', '.join(STRUCTURED_OUTPUT)} (json_object_schema for llama.cpp's server, none to "
                          "send no response_format and only parse the answers)")


def _accepted(ep: Endpoint, dialect: str) -> bool:
    resp = _send(ep, dialect)
    return resp is not None and resp.status_code == 200
