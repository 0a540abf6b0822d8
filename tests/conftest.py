from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"

# The embedded default is offline: a hub name must fail fast, never hang.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def cpu_overrides() -> dict:
    """The CPU protocol's agent budgets, as the shipped CPU experiments set them (iba_cpu.yaml and
    apeb_cpu.yaml `overrides:`): for a test's own experiment on the embedded model."""
    agents: dict = {}
    for name in ("iba_cpu", "apeb_cpu"):
        agents.update(yaml.safe_load((CONFIGS / "experiments" / f"{name}.yaml").read_text())["overrides"]["agents"])
    return {"agents": agents}


def config_tree(root: Path, model: str, max_tokens: int) -> Path:
    """A config folder of its own under `root`: the shipped agents, retrievers and deployments, the embedded
    SmolLM2 as `model` with answers of at most `max_tokens`, and empty judges/ and experiments/."""
    cfg = root / "configs"
    for kind in ("agents", "retrievers", "deployments"):
        (cfg / kind).mkdir(parents=True)
        for f in (CONFIGS / kind).glob("*.yaml"):
            (cfg / kind / f.name).write_text(f.read_text())
    (cfg / "models").mkdir()
    spec = yaml.safe_load((CONFIGS / "models" / "smollm2-135m.yaml").read_text())
    spec.update(name=model, sampling={"temperature": 0.0, "max_tokens": max_tokens})
    (cfg / "models" / f"{model}.yaml").write_text(yaml.safe_dump(spec))
    (cfg / "judges").mkdir()
    (cfg / "experiments").mkdir()
    return cfg


@pytest.fixture(scope="session", autouse=True)
def _stop_prefect_temporary_servers():
    """Stop the temporary Prefect servers that tests without an API made Prefect start, while pytest's output
    is still open: left to Prefect's atexit hook, the "Stopping temporary server" log line hits a closed
    stream and prints a logging traceback ("I/O operation on closed file") after every suite."""
    yield
    server_module = sys.modules.get("prefect.server.api.server")  # never import Prefect just for this
    if server_module is not None:
        for server in list(server_module.SubprocessASGIServer._instances.values()):
            server.stop()


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture()
def configs(tmp_path) -> Path:
    """A copy of the shipped configs/ that a test may break."""
    root = tmp_path / "configs"
    shutil.copytree(CONFIGS, root)
    return root


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One real local Prefect server (own PREFECT_HOME) for the tests that need an API."""
    from flows.prefect_server import local_prefect_server

    home = tmp_path_factory.mktemp("prefect-home")
    old = os.environ.get("PREFECT_HOME")
    os.environ["PREFECT_HOME"] = str(home)
    try:
        with local_prefect_server(home / "logs") as api:
            yield api
    finally:
        if old is None:
            os.environ.pop("PREFECT_HOME", None)
        else:
            os.environ["PREFECT_HOME"] = old
