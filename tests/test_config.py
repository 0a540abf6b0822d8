from pathlib import Path

import pytest
import yaml

from perseval.kernel.registry import agent_class
from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.config import load_config
from perseval.pipeline.controls import uses_history
from perseval.experiment.load import BENCHMARKS_DIR, judge_specs, load_experiment
from perseval.core.errors import ConfigError
from perseval.pipeline.plan import make_plan

from .conftest import CONFIGS, shipped_yaml
from perseval.experiment.load import experiment_file


@pytest.mark.parametrize("name", sorted(p.stem for p in shipped_yaml("experiments")))
def test_shipped_experiments_validate_and_plan(name, tmp_path, monkeypatch):
    path = experiment_file(name)
    # a paper config reads a release the user downloads (`source:`): stand an empty folder in for it
    monkeypatch.chdir(tmp_path)
    for entry in yaml.safe_load(path.read_text())["benchmarks"]:
        if entry.get("source"):
            (tmp_path / entry["source"]).mkdir(parents=True, exist_ok=True)
    exp = load_experiment(path)
    plan = make_plan(exp)
    # one cell per (agent, backbone it uses, retriever it uses, judge of its benchmark); keys are unique
    expected = 0
    for i, entry in enumerate(exp.experiment.benchmarks):
        judges = len(judge_specs(exp, i))
        for name in entry.agents:
            cfg = exp.agents[name]
            agent = agent_class(cfg.kind)(cfg.params)  # built here from its YAML, apart from the plan
            needs = agent.requires()
            backbones = len(exp.experiment.backbones) if "llm" in needs else 1
            # the corpus search uses the retriever's index; gold or web search does not
            uses_index = "retrieve" in needs or ("search" in needs and agent.search_spec() == "corpus")
            retrievers = len(exp.experiment.retrievers) if uses_index else 1
            # and once more per control for an agent that reads a history (perseval.pipeline.controls)
            controls = entry.controls if entry.controls is not None else exp.experiment.controls
            variants = 1 + (len(controls) if uses_history(needs) else 0)
            expected += backbones * retrievers * judges * variants
    assert len(plan.cells) == expected and len({c.key for c in plan.cells}) == expected


def test_all_model_and_deployment_configs_validate():
    for kind, model in (("models", ModelConfig), ("deployments", DeploymentConfig)):
        paths = list(shipped_yaml(kind))
        assert paths and all(load_config(model, p).name == p.stem for p in paths)


def _write_experiment(tmp_path: Path, data: dict) -> Path:
    (tmp_path / "experiments").mkdir()
    for kind in ("models", "deployments", "retrievers", "judges", "agents"):
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


def test_an_experiment_in_the_users_own_folder_finds_the_shipped_configs(tmp_path):
    """issue 14's user wrote their experiment outside the checkout: every name it used was 'unknown'."""
    path = tmp_path / "mine.yaml"
    mine_base = {**BASE, "judges": ["smollm2-apeb-rubric"]}
    path.write_text(yaml.safe_dump(mine_base))
    exp = load_experiment(path)
    assert exp.files["models/smollm2-135m"] == str(CONFIGS / "models" / "smollm2-135m.yaml")
    # a file of the same name beside the experiment overrides the shipped one
    (tmp_path / "judges").mkdir()
    mine = yaml.safe_load((BENCHMARKS_DIR / "apeb" / "configs" / "judges" / "smollm2-apeb-rubric.yaml").read_text())
    mine["sampling"] = {**(mine.get("sampling") or {}), "temperature": 0.3}
    (tmp_path / "judges" / "smollm2-apeb-rubric.yaml").write_text(yaml.safe_dump(mine))
    exp = load_experiment(path)
    assert exp.files["judges/smollm2-apeb-rubric"] == str(tmp_path / "judges" / "smollm2-apeb-rubric.yaml")
    assert exp.judges["smollm2-apeb-rubric"].sampling.temperature == 0.3
    # a name found in neither place names both paths and what is known
    path.write_text(yaml.safe_dump({**mine_base, "retrievers": ["no-such-retriever"]}))
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    msg = str(err.value)
    assert str(tmp_path / "retrievers" / "no-such-retriever.yaml") in msg
    assert str(CONFIGS / "retrievers" / "no-such-retriever.yaml") in msg and "'minilm'" in msg


def test_a_deployment_must_fit_its_models_format(tmp_path):
    path = _write_experiment(tmp_path, {**BASE, "deployments": {"smollm2-135m": "qwen3-4b-vllm-1gpu"}})
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert "deployments.smollm2-135m" in str(err.value) and "gguf" in str(err.value)


def test_iba_paper_grid_mirrors_the_paper():
    exp = load_experiment(experiment_file("iba_paper"))
    entry = exp.experiment.benchmarks[0]
    assert entry.sample == 6962 and entry.params["full_size"] is True and exp.experiment.seed == 42
    assert len(exp.judges) == 3 and exp.judges["qwen3-4b-judge"].repeats == 5  # Tables 6-9
    assert set(exp.retrievers) == {"bge-m3", "all-mpnet-base-v2"}  # Table 10
    kinds = {exp.agents[a].kind for a in entry.agents}
    assert kinds == {"rag", "iba.oracle", "iba.agent"}
    assert {exp.agents[a].params.get("controller") for a in entry.agents if exp.agents[a].kind == "iba.agent"} >= {"fc"}
    for r in exp.retrievers.values():  # C.3: 256-token chunks, 50 overlap
        assert (r.chunking.size, r.chunking.overlap) == (256, 50)
    assert exp.agents["iba-rag"].params["top_k"] == 3  # C.3: top-3 passages


STATS_BASE = {**BASE, "judges": []}  # apeb's own ranking judge: a loadable experiment


def test_statistics_settings_default_and_enter_only_the_score_keys(tmp_path):
    default = load_experiment(_write_experiment(tmp_path, STATS_BASE))
    assert default.experiment.statistics.model_dump() == {"level": 0.95, "resamples": 2000, "seed": 0,
                                                          "weighting": "instance"}
    other = tmp_path / "other"
    other.mkdir()
    changed = load_experiment(_write_experiment(other, {**STATS_BASE, "statistics": {"level": 0.9, "seed": 3}}))
    a, b = make_plan(default), make_plan(changed)
    assert b.cells[0].statistics.level == 0.9 and b.cells[0].statistics.resamples == 2000
    # new intervals: a new score key, but the same judge and run keys (no agent or judge re-runs)
    assert a.cells[0].key != b.cells[0].key and a.cells[0].judged.key == b.cells[0].judged.key
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(ConfigError) as err:
        load_experiment(_write_experiment(bad, {**STATS_BASE, "statistics": {"level": 95}}))
    assert "statistics.level" in str(err.value)


def test_a_baseline_must_be_one_of_the_entrys_agents(tmp_path):
    entry = {"name": "apeb", "sample": 2, "agents": ["apeb-oracle", "apeb-no-history"]}
    with_baseline = {**STATS_BASE, "benchmarks": [{**entry, "baseline": "apeb-oracle"}]}
    ok = load_experiment(_write_experiment(tmp_path, with_baseline))
    assert ok.experiment.benchmarks[0].baseline == "apeb-oracle"
    bad = tmp_path / "bad"
    bad.mkdir()
    path = _write_experiment(bad, {**STATS_BASE, "benchmarks": [{**entry, "baseline": "apeb-direct"}]})
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    message = str(err.value)
    assert str(path) in message and "benchmarks.0.baseline" in message
    assert "apeb-oracle, apeb-no-history" in message and "'apeb-direct'" in message


def test_no_shipped_config_name_is_defined_twice():
    """configs/ and the benchmark folders' configs/ are one namespace per kind: a name found twice would
    depend on the lookup order."""
    for kind in ("agents", "judges", "experiments", "models", "deployments", "retrievers"):
        stems = [p.stem for p in shipped_yaml(kind)]
        assert len(stems) == len(set(stems)) and stems, kind


def test_a_benchmark_s_agents_are_found_in_its_folder(tmp_path):
    """An experiment outside the repository names an agent that lives in perseval/benchmarks/iba/configs/."""
    exp = tmp_path / "mine.yaml"
    exp.write_text(yaml.safe_dump({"name": "mine", "backbones": ["smollm2-135m"], "retrievers": ["minilm"],
                                   "judges": ["smollm2-judge"],
                                   "benchmarks": [{"name": "iba", "sample": 2, "agents": ["iba-oracle"]}]}))
    resolved = load_experiment(exp)
    assert "perseval/benchmarks/iba/configs/agents/iba-oracle.yaml" in resolved.files["agents/iba-oracle"]
