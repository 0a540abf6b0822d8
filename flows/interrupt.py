"""Ctrl-C during a flow command (`perseval run`, `construct`, `stats`): stopped at once, exit code 130.

The first SIGINT ends the process within the handler: no request is sent after it (the process is gone), the
requests in flight are abandoned, and one line says what is kept and the command that resumes. Nothing is
lost by not unwinding: every answer received is already in the request cache (SQLite, written as it came),
every finished stage unit is already on disk, and the servers the run started go with it (their guards see
this process gone; a kept Prefect server drops its lease). Unwinding instead took 25-29 s (Prefect and Dask
waiting for tasks whose requests all failed), sending new requests all the while. A second Ctrl-C, should
the first line's write block, kills at once.

The line is the last thing printed. A terminal's Ctrl-C reaches every process of the foreground group, and a
LocalCluster's worker processes closing on it printed a Dask "ended with CancelledError" warning after the
line: they leave SIGINT to this process (this module is their Dask preload, `dask_setup`), which pauses them
at once and kills them as it exits.
The named semaphores of the cluster's queues, which os._exit would leave to multiprocessing's resource
tracker (two lines: "leaked semaphore objects"), are released as a normal exit releases them, and the claims
"in flight" that this process and its workers held in the request cache are removed.
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import psutil

from perseval.llm.cache import drop_claims
from perseval_flows.failure import kept_outputs

INTERRUPT_EXIT = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
PRELOAD = "distributed.worker.preload"  # Dask's setting: modules each worker imports, calling their dask_setup


def interrupt_line(root: Path, argv: Sequence[str]) -> str:
    """What `perseval` says when Ctrl-C stopped it."""
    return (f"interrupted: the requests in flight were abandoned and none sent after Ctrl-C; kept under {root}: "
            f"finished stage outputs ({kept_outputs(root)}) and every answer received (the request cache); "
            f"resume (nothing answered is sent again): {shlex.join(['perseval', *argv])}\n")


def _exit_now(*_: object) -> None:
    os._exit(INTERRUPT_EXIT)


def dask_setup(worker: Any) -> None:
    """Run by each LocalCluster worker at its start (a Dask preload): Ctrl-C is the perseval process's to
    handle, which stops the workers itself."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _workers() -> list[int]:
    """This process's Dask worker processes (its children that multiprocessing's spawn started)."""
    found = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.spawn" in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:  # gone already
            pass


def _release_semaphores() -> None:
    """Unlink the named semaphores this process made, as their finalizers do at a normal exit (which os._exit
    skips): else multiprocessing's resource tracker, which outlives this process, unlinks them and warns."""
    synchronize = sys.modules.get("multiprocessing.synchronize")
    if synchronize is None:
        return
    from multiprocessing import util

    for finalizer in list(getattr(util, "_finalizer_registry", {}).values()):
        if getattr(finalizer, "_callback", None) is synchronize.SemLock._cleanup:
            try:
                finalizer()
            except Exception:  # already gone: nothing to release
                pass


@contextmanager
def _workers_leave_interrupts_here() -> Iterator[None]:
    """Dask's config names this module as every LocalCluster worker's preload while the block runs (the nanny
    hands the config to the worker processes it starts)."""
    import dask

    preload = [*dask.config.get(PRELOAD, []), __name__]
    with dask.config.set({PRELOAD: preload}):
        yield


@contextmanager
def stop_on_interrupt(root: Path, argv: Sequence[str], cache: Path | None = None) -> Iterator[None]:
    """Within the block, Ctrl-C ends this process at once (exit 130) with the one line; `cache`: the request
    cache whose in-flight claims of this run are removed."""

    def stop(*_: object) -> None:
        signal.signal(signal.SIGINT, _exit_now)
        # the workers are paused first (they send, claim and print nothing more) and killed last, just before
        # this process exits: killed earlier, their nanny (a thread here) restarted them, saying so
        workers = _workers()
        _signal_all(workers, signal.SIGSTOP)
        if cache is not None:
            drop_claims(cache, [os.getpid(), *workers])
        _release_semaphores()
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
        _signal_all(workers, signal.SIGKILL)
        _exit_now()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        with _workers_leave_interrupts_here():
            yield
    finally:
        signal.signal(signal.SIGINT, previous)
