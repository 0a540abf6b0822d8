"""One probe request to an existing endpoint when its deployment starts: does it take the key and the
structured-output dialect the deployment sends?

An `openai` deployment starts no server, so nothing else tells, before the first agent request, that the
key is wrong or that the server answers 500 to every `json_schema` request (llama.cpp's own server and
several hosted ones take only `json_object`). The probe is a tiny structured request sent straight over
HTTP: not through the client, so it is no request of the run (no cache entry, no count). A refused key or
a refused dialect stops the start with a line naming the deployment YAML, the key and what is allowed. So
does an endpoint nothing answers at (no connection after a second try: a wrong host or port, a server that
is not up), which would otherwise fail every request of the run one by one; and so does one that takes the
connection but answers something that is not HTTP (an SSH port, a TLS port named http://, another protocol):
no re-run fixes a wrong address; and so does one that takes the connection and the request but sends no answer
within the deployment's `timeout_s` (a port that swallows what it is sent, a server that hangs): every request of
the run, which has that time each, would fail the same way after its retries. One that answers HTTP errors is
left to the run (an outage: its requests fail as data).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

import httpx

from perseval.llm.settings import STRUCTURED_OUTPUT
from perseval.core.errors import DeploymentError, EndpointRefused
from perseval.llm.client import auth_hint, response_format
from perseval.llm.endpoint import Endpoint
from perseval.core.redact import redact, secret_from_env

log = logging.getLogger("perseval.probe")
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
AUTH_STATUS = (401, 403)
CONNECT_TRIES = 2  # a connection refused (or never made) twice, CONNECT_PAUSE_S apart, stops the start
CONNECT_PAUSE_S = 1.0
CONNECT_TIMEOUT_S = 10.0  # per try: a host that drops the connection attempt


class Unreachable(Exception):
    """No connection could be made to the endpoint."""


class NotHttp(Exception):
    """The endpoint took the connection but what came back is not HTTP."""


class Silent(Exception):
    """The endpoint took the connection and the request, and sent nothing back within the deployment's timeout."""


def _send(ep: Endpoint, dialect: str) -> httpx.Response | None:
    """The probe request in `dialect` (None: an HTTP error other than those below); raises Unreachable when no
    connection could be made and NotHttp when what answered is no HTTP server, CONNECT_TRIES times each, and
    Silent when no answer came within the deployment's timeout_s (once: a second wait would double it)."""
    body: dict[str, Any] = {"model": ep.served_model, "max_tokens": 16, "temperature": 0.0,
                            "messages": [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}]}
    fmt = response_format(dialect, PROBE_SCHEMA)
    if fmt is not None:
        body["response_format"] = fmt
    key = secret_from_env(ep.api_key_env) if ep.api_key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for attempt in range(CONNECT_TRIES):
        try:
            return httpx.post(f"{ep.base_url}/chat/completions", json=body, headers=headers,
                              timeout=httpx.Timeout(ep.timeout_s, connect=CONNECT_TIMEOUT_S))
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing listens, no such host, no route
            if attempt + 1 == CONNECT_TRIES:
                raise Unreachable(f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no connection'}") from exc
            time.sleep(CONNECT_PAUSE_S)
        except httpx.ProtocolError as exc:  # a status line that is not HTTP's, or a close with no answer
            if attempt + 1 == CONNECT_TRIES:
                raise NotHttp(f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no HTTP answer'}") from exc
            time.sleep(CONNECT_PAUSE_S)
        except httpx.ReadTimeout as exc:
            raise Silent(type(exc).__name__) from exc
        except httpx.HTTPError as exc:
            log.warning("probe of %s: no answer (%s: %s); its requests will fail as data", ep.base_url,
                        type(exc).__name__, exc)
            return None
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
    try:
        resp = _send(ep, dialect)
    except Unreachable as exc:
        raise DeploymentError(f"{name}: {where}: key 'base_url': nothing answers at {ep.base_url} ({redact(str(exc))}, "
                              f"{CONNECT_TRIES} tries): check the URL and that the endpoint is up") from None
    except NotHttp as exc:
        raise DeploymentError(f"{name}: {where}: key 'base_url': what answers at {ep.base_url} is not an HTTP "
                              f"server ({redact(str(exc))}, {CONNECT_TRIES} tries): check the host, the port and "
                              "http:// or https:// (running again cannot fix an address)") from None
    except Silent as exc:
        raise DeploymentError(f"{name}: {where}: key 'base_url': {ep.base_url} took the connection and the request "
                              f"but sent no answer in {ep.timeout_s:g} s ({exc}; timeout_s, the time each request of "
                              "the run has): check that the host and port are the endpoint's and that it is not "
                              "stuck, or raise timeout_s for a slow one") from None
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
    try:
        resp = _send(ep, dialect)
    except (Unreachable, NotHttp, Silent):  # it answered the first probe: gone since, which the run will meet
        return False
    return resp is not None and resp.status_code == 200
