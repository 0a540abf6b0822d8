"""Runs a server as its child and takes it down when the perseval process that started it is gone.

`python guard.py PARENT_PID -- CMD...`, started by perseval.llm.deployments.start_server as
the leader of a new session, so the server and anything it starts (vLLM's workers) share
the guard's process group. Its stdin is a pipe whose only writer is the perseval process: the
pipe reads end-of-file the moment that process is gone (kill -9, a crash), whatever PID namespace
or subreaper adopts the guard, and every half second the guard also checks that PARENT_PID is still
its parent. Either way it sends SIGTERM to the whole group and SIGKILL after a grace period. A server that ends on its own ends the guard with the same exit code;
the SIGTERM perseval sends the group to stop a server reaches the server directly, and the
guard waits for it. Run by path with the standard library only, so it needs no import of
perseval in whatever environment a server is launched with.

`python guard.py --leases DIR --idle-s N -- CMD...` keeps a server that outlives the process that
started it (the local Prefect server re-runs reuse): each perseval process using it holds a lease,
a file DIR/<its pid>; the guard drops the leases of processes that are gone and stops the group
once no lease has been held for N seconds.

The server is the guard's child with a parent-death signal (Linux's PR_SET_PDEATHSIG): should the guard itself
be killed (kill -9), the server gets SIGTERM at once instead of serving on, unwatched, past its idle time.
"""
from __future__ import annotations

import ctypes
import functools
import os
import select
import signal
import stat
import subprocess
import sys
import time

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


def alive(pid: int) -> bool:
    if pid <= 0:  # no pid recorded (os.kill(0, ...) would ask about this process group)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def held(leases: str) -> bool:
    """Whether a live process holds a lease in `leases`; the leases of gone processes are removed."""
    live = False
    for name in os.listdir(leases) if os.path.isdir(leases) else []:
        if name.isdigit() and alive(int(name)):
            live = True
        else:
            try:
                os.unlink(os.path.join(leases, name))
            except OSError:
                pass
    return live


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(guard: int) -> None:
    """In the server's process before it runs: SIGTERM when the guard (its parent) dies. A no-op where there
    is no prctl (not Linux): the guard's own checks remain."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != guard:  # the guard died before the signal was set: it would never come
        os.kill(os.getpid(), signal.SIGTERM)


def parent_gone(parent: int, watch: int | None) -> bool:
    """Waits up to POLL_S for the parent's pipe (`watch`, stdin) to close; True once it has, or once the
    guard's parent is no longer PARENT_PID."""
    if watch is not None:
        ready, _, _ = select.select([watch], [], [], POLL_S)
        if ready and not os.read(watch, 4096):  # end of file: the only writer is gone
            return True
    else:
        time.sleep(POLL_S)
    return os.getppid() != parent


def main(argv: list[str]) -> int:
    cmd = argv[argv.index("--") + 1:]
    leases, idle_s, parent = None, 0.0, 0
    if argv[1] == "--leases":
        leases, idle_s = argv[2], float(argv[argv.index("--idle-s") + 1])
    else:
        parent = int(argv[1])
    for sig in (signal.SIGTERM, signal.SIGINT):  # meant for the server (it got them too): wait for it to end
        signal.signal(sig, lambda *_: None)
    watch = 0 if leases is None and stat.S_ISFIFO(os.fstat(0).st_mode) else None  # perseval's pipe, if given
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                             preexec_fn=functools.partial(_die_with_parent, os.getpid()))
    idle_since = time.monotonic()
    while True:
        if child.poll() is not None:
            return _exit_code(child.returncode)
        if leases is None:
            if parent_gone(parent, watch):
                return _exit_code(_stop_group(child))
            continue
        time.sleep(POLL_S)
        if held(leases):
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= idle_s:
            return _exit_code(_stop_group(child))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
