"""Seconds from launching `mlflow server` (as `perseval ui` does) to its first /health answer.

    python scripts/ui_startup.py [extra mlflow server options, e.g. --workers 1]
Run from a folder holding mlruns/mlflow.db; the server listens on 127.0.0.1:5099 and is stopped after.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

from perseval_flows.cli import ui_command
from perseval.report.sink.tracking import resolve_tracking
from perseval.experiment.config import MLflowSettings

uri, artifacts = resolve_tracking(MLflowSettings())
env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
t0 = time.monotonic()
proc = subprocess.Popen(ui_command(uri, artifacts, 5099) + sys.argv[1:], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
try:
    while time.monotonic() - t0 < 180:
        try:
            urllib.request.urlopen("http://127.0.0.1:5099/health", timeout=2)
            print(f"{' '.join(sys.argv[1:]) or 'default'}: answered after {time.monotonic() - t0:.1f} s")
            break
        except Exception:
            time.sleep(0.2)
finally:
    os.killpg(proc.pid, 15)
    proc.wait()
