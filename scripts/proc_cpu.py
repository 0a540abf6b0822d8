"""Per-process CPU of a running `perseval run`, by role and by stage: what the orchestration (the perseval
parent with its Dask scheduler and nannies, the Dask workers, the Prefect server) spends while the model
works. Used by scripts/bench_pipeline.py and scripts/bench_servers.py; not a test.

A thread samples the run's process tree (psutil) every `interval_s`: each process's CPU seconds (user +
system, its threads together). A stage's figure per role is the CPU seconds its processes used inside the
stage's wall-clock window (the flow's `stage_windows`; the CPU at each edge interpolated between samples)
over the window's length: percent of one core.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

ROLES = ("llama-server", "perseval parent", "dask worker", "prefect server", "server guard", "other")


def role(proc: psutil.Process, root_pid: int) -> str:
    """What a process of the run is, from its command line."""
    if proc.pid == root_pid:
        return "perseval parent"  # the flow, and the Dask scheduler and nannies of a LocalCluster live here
    try:
        cmd = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    text = " ".join(cmd)
    if cmd and Path(cmd[0]).name == "llama-server":
        return "llama-server"
    if "prefect" in text and "server" in text:
        return "prefect server"
    if "guard" in text:
        return "server guard"
    if "multiprocessing" in text or "distributed" in text:
        return "dask worker"  # spawned by a nanny (multiprocessing's spawn_main); its resource tracker too
    return "other"


class CpuSampler:
    """Samples the CPU seconds of `root_pid` and its descendants until `stop()`."""

    def __init__(self, root_pid: int, interval_s: float = 1.0):
        self.root_pid, self.interval_s = root_pid, interval_s
        # pid -> (role, created at, [(t, cpu seconds)])
        self.series: dict[int, tuple[str, float, list[tuple[float, float]]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "CpuSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        handles: dict[int, psutil.Process] = {}  # kept: cpu_times of a Process object is cheap to re-read
        while not self._stop.is_set():
            try:
                root = handles.get(self.root_pid) or psutil.Process(self.root_pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            now = time.time()
            for p in procs:
                p = handles.setdefault(p.pid, p)
                try:
                    t = p.cpu_times()
                    if p.pid not in self.series:
                        self.series[p.pid] = (role(p, self.root_pid), p.create_time(), [])
                    self.series[p.pid][2].append((now, t.user + t.system))
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self._stop.wait(self.interval_s)

    def table(self, windows: dict[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
        """stage -> {role: percent of one core, ..., "processes": {role: count}}, for each window."""
        out: dict[str, dict[str, Any]] = {}
        for stage, (start, end) in windows.items():
            used: dict[str, float] = defaultdict(float)
            count: dict[str, int] = defaultdict(int)
            for name, created, points in self.series.values():
                if not any(start < t <= end for t, _ in points):
                    continue  # not seen alive inside the window
                used[name] += cpu_at(points, created, end) - cpu_at(points, created, start)
                count[name] += 1
            span = max(end - start, 1e-9)
            out[stage] = {"seconds": round(end - start, 1),
                          **{r: round(100 * used[r] / span, 1) for r in ROLES if r in used},
                          "processes": dict(count)}
        return out


def cpu_at(points: list[tuple[float, float]], created: float, t: float) -> float:
    """A process's CPU seconds at time `t`, interpolated between its samples: 0 at its creation, its last
    sample after it ended."""
    prev_t, prev_c = (created, 0.0)
    for pt, pc in points:
        if pt >= t:
            if t <= prev_t:
                return prev_c if t >= created else 0.0
            return prev_c + (pc - prev_c) * (t - prev_t) / (pt - prev_t)
        prev_t, prev_c = pt, pc
    return prev_c


def format_table(table: dict[str, dict[str, Any]]) -> list[str]:
    """One line per stage: percent of one core per role (200% is both cores of a 2-core machine)."""
    lines = ["CPU % of one core by process, per stage: " + " | ".join(ROLES[:-1]) + " | other"]
    for stage, row in table.items():
        cells = [f"{r} {row[r]:.0f}%" + (f" (x{row['processes'][r]})" if row["processes"].get(r, 1) > 1 else "")
                 for r in ROLES if r in row]
        lines.append(f"  {stage:<9} {row['seconds']:>6.1f} s  " + ", ".join(cells))
    return lines
