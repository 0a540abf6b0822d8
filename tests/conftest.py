from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from perseval.agents.base import AgentContext
from perseval.benchmarks.actions import ActionFormat
from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.core.instances import Document, Passage
from perseval.experiment.load import BENCHMARKS_DIR, experiment_file

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"


def copy_configs(dest: Path, kinds: tuple[str, ...] | None = None) -> Path:
    """A flat copy of the shipped configs at `dest` (configs/ plus each benchmark folder's configs/, one
    folder per kind), for a test that edits one of them: the copy is the experiment's own root, so it wins."""
    for kind in kinds or ("models", "deployments", "agents", "retrievers", "judges", "experiments"):
        (dest / kind).mkdir(parents=True, exist_ok=True)
        for f in shipped_yaml(kind):
            (dest / kind / f.name).write_text(f.read_text())
    return dest


def shipped_config(kind: str, name: str) -> Path:
    """The shipped config file `name` of `kind`, wherever it lives (configs/ or a benchmark folder)."""
    return next(p for p in shipped_yaml(kind) if p.stem == name)


def shipped_yaml(kind: str) -> list[Path]:
    """Every shipped config of `kind` (agents, judges, experiments, ...): configs/<kind>/ and each benchmark
    folder's configs/<kind>/."""
    return sorted([*(CONFIGS / kind).glob("*.yaml"), *BENCHMARKS_DIR.glob(f"*/configs/{kind}/*.yaml")])

# The embedded default is offline: a hub name must fail fast, never hang.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the suite runs embedded servers beside its own CPU work (encoders, Dask, browsers): spin-waiting OpenMP
# threads would be descheduled and decoding collapse, so its servers wait passively (perseval's default is
# OpenMP's own, for a run that has the machine to itself)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# a `perseval run` a test starts without PREFECT_API_URL stops its local Prefect server with the run (tests stop
# what they start); tests/test_kept_prefect.py asks for a kept one itself
os.environ.setdefault("PERSEVAL_PREFECT_IDLE_S", "0")


def cpu_overrides() -> dict:
    """The CPU protocol's agent budgets, as the shipped CPU experiments set them (iba_cpu.yaml and
    apeb_cpu.yaml `overrides:`): for a test's own experiment on the embedded model."""
    agents: dict = {}
    for name in ("iba_cpu", "apeb_cpu"):
        agents.update(yaml.safe_load(experiment_file(name).read_text())["overrides"]["agents"])
    return {"agents": agents}


def shipped_configs(root: Path) -> Path:
    """A copy of the shipped models, deployments, agents, retrievers and judges under `root`/configs, with an
    empty experiments/ for the test's own file."""
    cfg = root / "configs"
    for kind in ("models", "deployments", "agents", "retrievers", "judges"):
        (cfg / kind).mkdir(parents=True)
        for f in shipped_yaml(kind):
            (cfg / kind / f.name).write_text(f.read_text())
    (cfg / "experiments").mkdir()
    return cfg


def config_tree(root: Path, model: str, max_tokens: int) -> Path:
    """A config folder of its own under `root`: the shipped agents, retrievers and deployments, the embedded
    SmolLM2 as `model` with answers of at most `max_tokens`, and empty judges/ and experiments/."""
    cfg = root / "configs"
    for kind in ("agents", "retrievers", "deployments"):
        (cfg / kind).mkdir(parents=True)
        for f in shipped_yaml(kind):
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
    return copy_configs(tmp_path / "configs")


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One real local Prefect server (own PREFECT_HOME) for the tests that need an API."""
    from perseval_flows.prefect_server import local_prefect_server

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


# --- shared builders: data and config trees several test modules use --------------------------------------

def build(sample=10, seed=7, **params):
    params.setdefault("noise_per_evidence", 4)
    return IbaBenchmark(params).build(sample=sample, seed=seed, source=None)


def by_owner(documents: list[Document]) -> dict[str, list[Document]]:
    out: dict[str, list[Document]] = {}
    for d in documents:
        out.setdefault(d.owner, []).append(d)
    return out


def evidence(docs: list[Document]) -> list[Document]:
    return [d for d in docs if "dimension" in d.meta]


def memory_retrieve(documents: list[Document], calls: list | None = None):
    """A lexical stand-in for the dense retriever: word-overlap score over the owner's turns."""
    owners = by_owner(documents)

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z]+", text.lower()))

    async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
        if calls is not None:
            calls.append((owner, query, k))
        q = words(query)
        ranked = sorted(owners.get(owner, []), key=lambda d: -len(q & words(d.text)))
        return [Passage(d.doc_id, 0, d.text, float(len(q & words(d.text)))) for d in ranked[:k]]

    return retrieve


def context(data, llm=None, calls=None) -> AgentContext:
    owners = by_owner(data.documents)
    return AgentContext(llm=llm, retrieve=memory_retrieve(data.documents, calls), documents=lambda u: owners.get(u, []),
                        request_format=ActionFormat())


def minimal(tmp_path: Path, inst: dict | None = None, turns: list[dict] | None = None,
            raw_instances: str | None = None):
    """A one-instance JSONL release, with `inst` fields overriding a valid CallAPI row."""
    row = {"instance_id": "a1", "user_id": "u1", "domain": "Daily Consumption", "scenario": "Food ordering",
           "action_type": "CallAPI(params)", "query": "Order two dumplings from Golden Wok.",
           "preferences": [{"dimension": "spice_level", "value": "hot", "previous": "mild"}],
           "api": {"name": "order_food", "slots": [{"name": "restaurant"}, {"name": "spice_level",
                                                                            "values": ["mild", "hot"]}],
                   "task_fixed": {"restaurant": "Golden Wok"}},
           "gold_slots": {"spice_level": "hot"}}
    for k, v in (inst or {}).items():
        if v is None:
            row.pop(k, None)
        else:
            row[k] = v
    (tmp_path / "instances.jsonl").write_text(raw_instances if raw_instances is not None else json.dumps(row) + "\n")
    turns = turns if turns is not None else [
        {"user_id": "u1", "timestamp": "2025-03-01T09:00:00", "user": "Mild please.", "assistant": "Sure.",
         "evidence": [{"dimension": "spice_level", "value": "mild", "kind": "statement", "phase": "old"}]},
        {"user_id": "u1", "timestamp": "2025-03-02T09:00:00", "text": "User: What is Go?\nAssistant: A game."},
        {"user_id": "u1", "timestamp": "2025-03-03T09:00:00", "user": "Now I like it hot.",
         "evidence": [{"dimension": "spice_level", "value": "hot", "kind": "correction", "phase": "new"}]}]
    (tmp_path / "histories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    return tmp_path


PLUGIN = Path(__file__).parent / "plugins" / "tiny_plugin.py"


def write_configs(root: Path, plugin: str = str(PLUGIN)) -> Path:
    """A config tree holding only the plugin's YAML: one agent, one retriever, one experiment."""
    cfg = root / "configs"
    for kind, name, data in (
        ("agents", "tiny-lookup", {"name": "tiny-lookup", "kind": "tiny.lookup"}),
        ("retrievers", "tiny-overlap", {"name": "tiny-overlap", "kind": "tiny.overlap",
                                        "chunking": {"size": 32, "overlap": 4}, "params": {"lowercase": True}}),
        ("experiments", "tiny", {
            "name": "tiny-plugin", "seed": 5, "shard_size": 3, "plugins": [plugin], "backbones": [],
            "retrievers": ["tiny-overlap"], "benchmarks": [{"name": "tiny", "sample": 7, "params": {"noise": 3},
                                                           "agents": ["tiny-lookup"]}],
            "dask": {"n_workers": 2, "threads_per_worker": 1},
            "mlflow": {"experiment": "tiny-plugin", "tracking_uri": "sqlite:///mlruns/mlflow.db",
                       "artifact_root": "mlruns/artifacts"}}),
    ):
        (cfg / kind).mkdir(parents=True, exist_ok=True)
        (cfg / kind / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return cfg / "experiments" / "tiny.yaml"
