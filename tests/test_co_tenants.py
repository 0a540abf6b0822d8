"""A run that finds another perseval model server computing on the machine says so in one line and starts its
own with OMP_WAIT_POLICY=PASSIVE, unless the caller chose an OpenMP wait (issue 45, item 3): real processes
whose command lines read as an embedded server's, one spinning, one asleep."""
from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time

from perseval.llm.deployments import BUSY_SHARE, sample_machine, say_not_reused, shared_machine_env


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


def test_a_busy_co_tenant_server_is_said_and_makes_the_new_server_passive(tmp_path, caplog):
    busy = _fake_server(tmp_path, "while True: pass")
    idle = _fake_server(tmp_path, "import time; time.sleep(60)")
    try:
        time.sleep(0.5)
        found = dict(sample_machine()[1])  # (pid, share of a core) of other runs' busy servers
        assert busy in found and found[busy] >= BUSY_SHARE and idle not in found
        with caplog.at_level(logging.WARNING, logger="perseval.deployments"):
            assert shared_machine_env({}) == {"OMP_WAIT_POLICY": "PASSIVE"}
            assert shared_machine_env({"GOMP_SPINCOUNT": "1000"}) == {}  # the caller's choice stands
        lines = [r.getMessage() for r in caplog.records if "this machine is shared" in r.getMessage()]
        assert len(lines) == 2 and all(f"pid {busy}" in line and f"pid {idle}" not in line for line in lines), lines
        assert lines[0].endswith("with OMP_WAIT_POLICY=PASSIVE") and "PASSIVE" not in lines[1], lines
    finally:
        for pid in (busy, idle):
            os.kill(pid, signal.SIGKILL)


def test_another_run_s_server_of_the_same_model_is_named_with_why_it_is_not_reused(tmp_path, caplog):
    """Item 8: a second run that finds the first run's server of its model says, in one line, that it does not
    reuse it and why; another model's server is not named."""
    same = _fake_server(tmp_path, "import time; time.sleep(60)")
    try:
        time.sleep(0.3)
        with caplog.at_level(logging.WARNING, logger="perseval.deployments"):
            say_not_reused("smollm2-135m")
            say_not_reused("qwen3-4b-instruct")
        lines = [r.getMessage() for r in caplog.records if "not reused" in r.getMessage()]
        # other runs on this machine may serve the model too: the line lists every pid, this one among them
        pids = re.search(r"\(pid ([\d, ]+)\)", lines[0]) if len(lines) == 1 else None
        assert pids and str(same) in pids.group(1).split(", ") and "smollm2-135m" in lines[0], lines
        assert "belongs to the run that started it" in lines[0]
    finally:
        os.kill(same, signal.SIGKILL)
