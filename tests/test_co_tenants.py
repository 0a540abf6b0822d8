"""A run that finds another perseval model server computing on the machine says so in one line (issue 45,
item 3): real processes whose command lines read as an embedded server's, one spinning, one asleep."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

from perseval.llm.deployments import BUSY_SHARE, busy_co_tenants, say_co_tenants


def _fake_server(tmp_path, code: str) -> int:
    """The pid of a process whose command line starts as perseval's llama-server's does (the binary's name,
    --alias), started by a launcher that exits at once: another run's, not a child of this process."""
    exe = tmp_path / "llama-server"
    if not exe.exists():
        os.symlink(sys.executable, exe)
    cmd = [str(exe), "-c", code, "--alias", "smollm2-135m"]
    quiet = "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL"  # the launcher's pipes close when it exits
    code = f"import subprocess; print(subprocess.Popen({cmd!r}, {quiet}).pid)"
    launcher = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(launcher.stdout)


def test_a_busy_co_tenant_server_is_said_in_one_line_and_an_idle_one_is_not(tmp_path, caplog):
    busy = _fake_server(tmp_path, "while True: pass")
    idle = _fake_server(tmp_path, "import time; time.sleep(60)")
    try:
        time.sleep(0.5)
        found = dict(busy_co_tenants())
        assert busy in found and found[busy] >= BUSY_SHARE and idle not in found
        with caplog.at_level(logging.WARNING, logger="perseval.deployments"):
            say_co_tenants()
        lines = [r.getMessage() for r in caplog.records if "busy on this machine" in r.getMessage()]
        assert len(lines) == 1 and f"pid {busy}" in lines[0] and f"pid {idle}" not in lines[0], lines
    finally:
        for pid in (busy, idle):
            os.kill(pid, signal.SIGKILL)
