from pathlib import Path

import pytest
import yaml

from perseval.config import ModelConfig, load_config, load_experiment
from perseval.errors import ConfigError
from perseval.plan import make_plan

from .conftest import CONFIGS


@pytest.mark.parametrize("name", ["quickstart", "gpu", "iba_cpu", "iba_paper"])
def test_shipped_experiments_validate_and_plan(name):
    exp = load_experiment(CONFIGS / "experiments" / f"{name}.yaml")
    plan = make_plan(exp)
    assert plan.cells, "every shipped experiment has cells"
    # every cell's backbone and judge model resolved to a config
    for cell in plan.cells:
        assert cell.backbone is None or cell.backbone in exp.models
        assert cell.judge == "rule" or exp.judges[cell.judge].model in exp.models


def test_all_model_configs_validate():
    for path in (CONFIGS / "models").glob("*.yaml"):
        cfg = load_config(ModelConfig, path)
        assert cfg.name == path.stem


def _write_experiment(tmp_path: Path, data: dict) -> Path:
    (tmp_path / "experiments").mkdir()
    for kind in ("models", "retrievers", "judges", "agents"):
        (tmp_path / kind).symlink_to(CONFIGS / kind)
    path = tmp_path / "experiments" / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


BASE = {"name": "x", "backbones": ["smollm2-135m"], "retrievers": ["minilm"], "judges": ["smollm2-judge"],
        "benchmarks": [{"name": "apeb", "sample": 2, "agents": ["apeb-oracle"]}]}


def test_bad_key_names_file_and_key(tmp_path):
    path = _write_experiment(tmp_path, {**BASE, "shard_size": "many"})
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert str(path) in str(err.value) and "shard_size" in str(err.value)


def test_unknown_key_is_rejected(tmp_path):
    path = _write_experiment(tmp_path, {**BASE, "judgez": []})
    with pytest.raises(ConfigError, match="judgez"):
        load_experiment(path)


def test_unknown_reference_names_missing_file(tmp_path):
    path = _write_experiment(tmp_path, {**BASE, "backbones": ["no-such-model"]})
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert "backbones" in str(err.value) and "no-such-model.yaml" in str(err.value)


def test_embedded_model_needs_gguf(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"name": "m", "kind": "embedded", "model": "x"}))
    with pytest.raises(ConfigError, match="gguf"):
        load_config(ModelConfig, path)


def test_iba_paper_grid_mirrors_the_paper():
    exp = load_experiment(CONFIGS / "experiments" / "iba_paper.yaml")
    entry = exp.experiment.benchmarks[0]
    assert entry.sample == 6962 and entry.params["full_size"] is True and exp.experiment.seed == 42
    assert len(exp.judges) == 3 and exp.judges["qwen3-4b-judge"].repeats == 5  # Tables 6-9
    assert set(exp.retrievers) == {"bge-m3", "all-mpnet-base-v2"}  # Table 10
    kinds = {exp.agents[a].kind for a in entry.agents}
    assert kinds == {"iba.rag", "iba.oracle", "iba.agent"}
    assert {exp.agents[a].params.get("controller") for a in entry.agents if exp.agents[a].kind == "iba.agent"} >= {"fc"}
    for r in exp.retrievers.values():  # C.3: 256-token chunks, 50 overlap, top-3
        assert (r.chunking.size, r.chunking.overlap, r.top_k) == (256, 50, 3)
