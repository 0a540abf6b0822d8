"""Runs a server as its child and takes it down when the perseval process that started it is gone.

`python guard.py PARENT_PID -- CMD...`, started by perseval.llm.deployments.start_server as
the leader of a new session, so the server and anything it starts (vLLM's workers) share
the guard's process group. Every half second it checks that PARENT_PID is still its
parent; once it is not (kill -9, a crash), it sends SIGTERM to the whole group and SIGKILL
after a grace period. A server that ends on its own ends the guard with the same exit code;
the SIGTERM perseval sends the group to stop a server reaches the server directly, and the
guard waits for it. Run by path with the standard library only, so it needs no import of
perseval in whatever environment a server is launched with.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

POLL_S = 0.5
GRACE_S = 10.0


def _exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc  # killed by signal N -> 128 + N, as a shell reports it


def _stop_group(child: subprocess.Popen) -> int:
    os.killpg(0, signal.SIGTERM)  # the guard's own handler ignores it
    try:
        rc = child.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        rc = -signal.SIGKILL
    os.killpg(0, signal.SIGKILL)  # whatever the server started, and the guard itself
    return rc


def main(argv: list[str]) -> int:
    parent, cmd = int(argv[1]), argv[argv.index("--") + 1:]
    for sig in (signal.SIGTERM, signal.SIGINT):  # meant for the server (it got them too): wait for it to end
        signal.signal(sig, lambda *_: None)
    child = subprocess.Popen(cmd)
    while True:
        try:
            return _exit_code(child.wait(timeout=POLL_S))
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != parent:
            return _exit_code(_stop_group(child))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
