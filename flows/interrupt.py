"""Ctrl-C during a flow command (`perseval run`, `construct`, `stats`): stopped at once, exit code 130.

The first SIGINT ends the process within the handler: no request is sent after it (the process is gone), the
requests in flight are abandoned, and one line says what is kept and the command that resumes. Nothing is
lost by not unwinding: every answer received is already in the request cache (SQLite, written as it came),
every finished stage unit is already on disk, and the servers the run started go with it (their guards see
this process gone; a kept Prefect server drops its lease). Unwinding instead took 25-29 s (Prefect and Dask
waiting for tasks whose requests all failed), sending new requests all the while. A second Ctrl-C, should
the first line's write block, kills at once.
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from perseval_flows.failure import kept_outputs

INTERRUPT_EXIT = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended


def interrupt_line(root: Path, argv: Sequence[str]) -> str:
    """What `perseval` says when Ctrl-C stopped it."""
    return (f"interrupted: the requests in flight were abandoned and none sent after Ctrl-C; kept under {root}: "
            f"finished stage outputs ({kept_outputs(root)}) and every answer received (the request cache); "
            f"resume (nothing answered is sent again): {shlex.join(['perseval', *argv])}\n")


def _exit_now(*_: object) -> None:
    os._exit(INTERRUPT_EXIT)


@contextmanager
def stop_on_interrupt(root: Path, argv: Sequence[str]) -> Iterator[None]:
    """Within the block, Ctrl-C ends this process at once (exit 130) with the one line."""

    def stop(*_: object) -> None:
        signal.signal(signal.SIGINT, _exit_now)
        try:
            line = interrupt_line(root, argv)
        except OSError:  # the output root unreadable: the line without its count
            line = f"interrupted; resume: {shlex.join(['perseval', *argv])}\n"
        for stream in (sys.stdout, sys.stderr):  # what was printed before the line, unless mid-write
            try:
                stream.flush()
            except (OSError, RuntimeError, ValueError):
                pass
        os.write(2, line.encode())
        _exit_now()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
