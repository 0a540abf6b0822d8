"""`perseval ui`: MLflow's own UI and tracking API on 127.0.0.1, in one process that answers at once.

`mlflow server` runs two Pythons one after the other: its command line imports MLflow's whole tracking server and
opens the store, then starts uvicorn in a new process, which imports it all again before its first answer.
Importing that server is nearly all of the wait (scripts/ui_startup.py measures each part;
docs/guides/performance.md, "The MLflow UI's start"), so perseval does it once: this module binds the port
first and answers every request with a page saying what the UI is waiting for (503, reloading itself), imports
MLflow's app, opens the store as `mlflow server` does (its schema check, the tables of a new store), then hands
the same listening socket to uvicorn serving `mlflow.server.fastapi_app:app`, so no request in between is
refused. The configuration is `mlflow server`'s for these options, set through the environment variables MLflow's
server reads (their names imported from MLflow, so a renamed one fails loudly here).

    python -m perseval_flows.ui --backend-store-uri URI --default-artifact-root DIR --host 127.0.0.1 --port 5000
"""
from __future__ import annotations

import argparse
import http.server
import os
import socket
import sys
import threading
import time
import uuid
from typing import Any, NoReturn, Sequence


def ui_command(uri: str, artifacts: str, port: int) -> list[str]:
    """The launch command of the MLflow UI: loopback only."""
    from perseval.llm.embedded import HOST  # the light module that owns it: no client library imported here

    return [sys.executable, "-m", "perseval_flows.ui", "--backend-store-uri", uri, "--default-artifact-root",
            artifacts, "--host", HOST, "--port", str(port)]


def start(uri: str, artifacts: str, port: int) -> NoReturn:
    """Become the UI's server (exec, not a child process: Ctrl-C or a kill of this PID stops the server itself)."""
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")  # no job runner beside the UI
    os.execve(sys.executable, ui_command(uri, artifacts, port), env)


class Waiting:
    """What the UI waits for, since when: the placeholder page and the terminal both say it."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.step, self.since = "starting", self.t0

    def enter(self, step: str) -> None:
        now = time.monotonic()
        print(f"MLflow UI: {step} ({now - self.t0:.1f} s since start)", flush=True)
        self.step, self.since = step, now

    def page(self) -> bytes:
        now = time.monotonic()
        return (f"<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=2><title>MLflow UI starting"
                f"</title><p>perseval ui: the MLflow UI is starting, {now - self.t0:.0f} s so far. Now: {self.step} "
                f"({now - self.since:.0f} s). This page reloads itself until the UI answers.</p>").encode()


def placeholder(sock: socket.socket, waiting: Waiting) -> http.server.ThreadingHTTPServer:
    """A server on the already-listening `sock` that answers every request 503 with `waiting`'s page."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = waiting.page()
            self.send_response(503)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Retry-After", "2")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_HEAD = _answer

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal says what it waits for
            pass

    server = http.server.ThreadingHTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()  # the one it made unbound: serve on the socket the UI keeps
    server.socket = sock
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    return server


def listening(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def configure(uri: str, artifacts: str) -> None:
    """The environment `mlflow server --backend-store-uri URI --default-artifact-root DIR` gives its workers."""
    from mlflow.environment_variables import (_MLFLOW_IN_JOB_EXECUTOR, _MLFLOW_SERVER_BOOT_ID, _MLFLOW_SGI_NAME,
                                              MLFLOW_ENABLE_WORKSPACES)
    from mlflow.server.constants import (ARTIFACT_ROOT_ENV_VAR, BACKEND_STORE_URI_ENV_VAR, REGISTRY_STORE_URI_ENV_VAR,
                                         SERVE_ARTIFACTS_ENV_VAR)

    os.environ.update({BACKEND_STORE_URI_ENV_VAR: uri, REGISTRY_STORE_URI_ENV_VAR: uri, ARTIFACT_ROOT_ENV_VAR: artifacts,
                       SERVE_ARTIFACTS_ENV_VAR: "true", _MLFLOW_SGI_NAME.name: "uvicorn",
                       MLFLOW_ENABLE_WORKSPACES.name: "false", _MLFLOW_IN_JOB_EXECUTOR.name: "false",
                       _MLFLOW_SERVER_BOOT_ID.name: uuid.uuid4().hex})


def serve(uri: str, artifacts: str, host: str, port: int) -> None:
    waiting = Waiting()
    try:
        sock = listening(host, port)
    except OSError as exc:  # one line, before anything is imported: the port is the user's to change
        print(f"error: cannot listen on {host}:{port} ({exc.strerror or exc}); another perseval ui or MLflow server "
              "may hold it: stop it, or pass --port", file=sys.stderr)
        raise SystemExit(2) from None
    early = placeholder(sock, waiting)
    waiting.enter(f"listening on http://{host}:{port}; importing MLflow's tracking server")
    import uvicorn

    configure(uri, artifacts)
    from mlflow.server.fastapi_app import app
    from mlflow.server.handlers import initialize_backend_stores

    waiting.enter(f"opening the store {uri} (its schema check)")
    initialize_backend_stores(uri, uri, artifacts)
    early.shutdown()  # stops answering; the socket stays open, so a request now waits in its backlog
    config = uvicorn.Config(app, log_config=log_config(), timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    threading.Thread(target=announce, args=(server, waiting, f"http://{host}:{port}"), daemon=True).start()
    server.run(sockets=[sock])


def log_config() -> str:
    """MLflow's own uvicorn log configuration, as `mlflow server` passes it."""
    import mlflow.server

    return os.path.join(os.path.dirname(mlflow.server.__file__), "uvicorn_log_config.yaml")


def announce(server: Any, waiting: Waiting, url: str) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.05)
    if server.started:
        print(f"MLflow UI on {url} ({time.monotonic() - waiting.t0:.1f} s to start; Ctrl-C stops it)", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m perseval_flows.ui", description=__doc__.splitlines()[0])
    parser.add_argument("--backend-store-uri", required=True)
    parser.add_argument("--default-artifact-root", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)
    try:
        serve(args.backend_store_uri, args.default_artifact_root, args.host, args.port)
    except KeyboardInterrupt:  # Ctrl-C while MLflow loads: stopped, no traceback (uvicorn handles it once serving)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
