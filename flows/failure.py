"""What `perseval run` says when a run stops after start-up: a model server that cannot start, a full
disk, a Prefect or Dask start failure.

A few short lines instead of a traceback: what failed, what was kept (every stage output finished so
far stays under the output root; a stage unit is written under its key only when complete), and the
exact command that resumes (the same command line: finished units are skipped). The full traceback goes
to a log file under `<output root>/logs/`, and to the terminal with PERSEVAL_TRACEBACK=1.
"""
from __future__ import annotations

import errno
import os
import shlex
import time
import traceback
from pathlib import Path
from typing import Sequence

from perseval.core.errors import DeploymentError, EndpointRefused

LATE_FAILURE_EXIT = 4  # the run stopped after start-up; finished outputs are kept, the same command resumes
TRACEBACK_ENV = "PERSEVAL_TRACEBACK"
STAGES = ("data", "documents", "index", "run", "judge", "score", "analysis")  # folders under the output root


def what_failed(exc: BaseException) -> str:
    """One line naming what failed (the first line of the error; a server's log tail stays in its log)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, DeploymentError):
        return first + (f" (server log: {exc.log_path})" if exc.log_path else "")
    if isinstance(exc, OSError):
        where = f" writing {exc.filename}" if exc.filename else ""
        if exc.errno == errno.ENOSPC:
            return f"the disk is full (no space left on device){where}: free space and run again"
        return f"{exc.strerror or first}{where}"
    return f"{type(exc).__name__}: {first}"


def _holds_output(unit: Path) -> bool:
    """A unit folder that holds written output: a folder with only its bookkeeping files (names starting
    with '_', such as the shard layout a run output records before its first part) holds nothing yet."""
    return unit.is_dir() and any(not p.name.startswith("_") for p in unit.iterdir())


def kept_outputs(root: Path) -> str:
    """The finished stage units under `root`, e.g. 'data 1, index 2' (or 'none yet')."""
    counts = []
    for stage in STAGES:
        folder = root / stage
        n = sum(1 for p in folder.iterdir() if _holds_output(p)) if folder.is_dir() else 0
        if n:
            counts.append(f"{stage} {n}")
    return ", ".join(counts) or "none yet"


def write_traceback(exc: BaseException, log_dir: Path) -> Path | None:
    """The full traceback in `log_dir`; None when it cannot be written (the full disk itself, say)."""
    path = log_dir / f"perseval-run-failed-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(exc)))
    except OSError:
        return None
    return path


def failure_report(exc: BaseException, root: Path, argv: Sequence[str]) -> list[str]:
    """The lines `perseval run` prints for a run that stopped after start-up (`argv`: its arguments)."""
    log = write_traceback(exc, root / "logs")
    lines = [f"run stopped: {what_failed(exc)}",
             f"kept: stage outputs finished so far stay under {root} ({kept_outputs(root)}); nothing is removed",
             f"{'once that is fixed, resume' if isinstance(exc, EndpointRefused) else 'resume'}: "
             f"{shlex.join(['perseval', *argv])}"]
    if os.environ.get(TRACEBACK_ENV):
        lines.append("".join(traceback.format_exception(exc)).rstrip())
    else:
        lines.append(f"traceback: {log}" if log else f"traceback: not written (set {TRACEBACK_ENV}=1 to print it)")
    return lines
