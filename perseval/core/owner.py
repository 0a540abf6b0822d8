"""Which process owns a run: `perseval-owner:<host>:<pid>:<process start time>` (a PID alone could be reused).

Prefect flow runs and MLflow runs carry this tag, so a later run can tell a run whose process was killed
(still RUNNING in the store forever) from one that is really running, on this host or elsewhere."""
from __future__ import annotations

import socket

import psutil

OWNER_TAG = "perseval-owner"


def owner_tag(pid: int | None = None) -> str:
    """The owner tag of process `pid` (default: this process)."""
    proc = psutil.Process(pid)
    return f"{OWNER_TAG}:{socket.gethostname()}:{proc.pid}:{int(proc.create_time())}"


def owner_gone(tag: str) -> bool:
    """Whether the process an owner tag names is gone; False for another host's run (it cannot be checked)."""
    _, host, pid, started = tag.rsplit(":", 3)
    if host != socket.gethostname():
        return False
    try:
        return int(psutil.Process(int(pid)).create_time()) != int(started)
    except psutil.NoSuchProcess:
        return True
