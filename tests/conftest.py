from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"

# The embedded default is offline: a hub name must fail fast, never hang.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def repo() -> Path:
    return REPO


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
