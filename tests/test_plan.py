"""The plan's key invariants: what a change reaches is recomputed, and nothing else.

Each test edits one thing in a copy of the quickstart's config tree and compares the plans' keys.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from perseval.experiment.load import load_experiment
from perseval.core.errors import ConfigError
from perseval.pipeline.plan import make_plan
from perseval.pipeline.units import Plan

from .conftest import CONFIGS, shipped_config, copy_configs


def tree(tmp_path: Path, name: str = "t") -> Path:
    root = tmp_path / name / "configs"
    copy_configs(root)
    return root


def edit(path: Path, **changes) -> None:
    data = yaml.safe_load(path.read_text())
    for dotted, value in changes.items():
        node, *keys = [data, *dotted.split("__")]
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    path.write_text(yaml.safe_dump(data))


def plan_of(root: Path) -> Plan:
    return make_plan(load_experiment(root / "experiments" / "quickstart.yaml"))


def keys(plan: Plan) -> dict[str, dict[str, str]]:
    """Per cell name: its data, index, run, judge and score keys."""
    return {c.name: {"data": c.run.data.key, "index": c.run.index.key if c.run.index else "-", "run": c.run.key,
                     "judge": c.judged.key, "score": c.key} for c in plan.cells}


def changed(a: Plan, b: Plan, stage: str) -> set[str]:
    ka, kb = keys(a), keys(b)
    assert ka.keys() == kb.keys()
    return {name for name in ka if ka[name][stage] != kb[name][stage]}


@pytest.fixture()
def base(tmp_path) -> Plan:
    return plan_of(tree(tmp_path, "base"))


def test_a_new_judge_setting_rejudges_without_rerunning_agents(tmp_path, base):
    root = tree(tmp_path)
    edit(root / "judges" / "smollm2-judge.yaml", sampling__max_tokens=97)
    other = plan_of(root)
    assert changed(base, other, "run") == set()
    assert changed(base, other, "judge") == {c.name for c in base.cells if c.judge == "smollm2-judge"}
    # the rule judges' outputs are untouched
    assert not any(c.judge in ("iba.slots", "apeb.ranking") for c in base.cells if c.name in changed(base, other, "score"))


def test_an_agent_param_reruns_that_agent_only(tmp_path, base):
    root = tree(tmp_path)
    edit(root / "agents" / "iba-rag.yaml", params__top_k=2)  # (its budgets are the experiment's overrides)
    other = plan_of(root)
    assert changed(base, other, "data") == set()
    assert changed(base, other, "run") == {c.name for c in base.cells if c.agent == "iba-rag"}


def test_a_retriever_change_reaches_only_agents_that_retrieve(tmp_path, base):
    root = tree(tmp_path)
    edit(root / "retrievers" / "minilm.yaml", chunking__overlap=40)
    other = plan_of(root)
    reached = changed(base, other, "run")
    assert reached == {c.name for c in base.cells if c.retriever == "minilm"}
    assert not any(a in name for name in reached for a in ("iba-no-history", "oracle", "apeb-direct"))


def test_sampling_reruns_model_agents_and_serving_changes_nothing(tmp_path, base):
    root = tree(tmp_path)
    edit(root / "models" / "smollm2-135m.yaml", sampling__max_tokens=150)
    edit(root / "deployments" / "smollm2-135m-cpu.yaml", max_concurrency=1, context_length=2048, timeout_s=9)
    other = plan_of(root)
    assert changed(base, other, "run") == {c.name for c in base.cells if c.backbone}
    served_only = tree(tmp_path, "served")
    edit(served_only / "deployments" / "smollm2-135m-cpu.yaml", max_concurrency=1, startup_timeout_s=5)
    assert keys(plan_of(served_only)) == keys(base)


def test_new_weights_at_the_same_path_are_not_done(tmp_path):
    """The model's identity is the weights' content: replacing the file at the same path changes every key
    the model reaches (it used to be keyed by the path, so stale outputs counted as done)."""
    weights = tmp_path / "weights.gguf"
    weights.write_bytes(b"GGUF first weights")
    root = tree(tmp_path)
    edit(root / "models" / "smollm2-135m.yaml", source=str(weights))
    first = plan_of(root)
    weights.write_bytes(b"GGUF other weights!")
    second = plan_of(root)
    assert changed(first, second, "run") == {c.name for c in first.cells if c.backbone}
    assert changed(first, second, "judge") >= {c.name for c in first.cells if c.judge == "smollm2-judge"}
    edit(root / "models" / "smollm2-135m.yaml", quantization="Q8_0")
    assert changed(second, plan_of(root), "run") == {c.name for c in first.cells if c.backbone}


def test_a_pinned_digest_must_match_the_weights(tmp_path):
    weights = tmp_path / "weights.gguf"
    weights.write_bytes(b"GGUF weights")
    root = tree(tmp_path)
    edit(root / "models" / "smollm2-135m.yaml", source=str(weights), digest="0" * 64)
    with pytest.raises(ConfigError, match="pins digest"):
        plan_of(root)


def test_a_benchmark_param_reaches_everything_downstream_of_its_data(tmp_path, base):
    root = tree(tmp_path)
    edit(root / "experiments" / "quickstart.yaml", benchmarks=[
        {"name": "iba", "sample": 6, "params": {"noise_per_evidence": 9}, "agents": ["iba-rag", "iba-no-history",
                                                                                   "iba-oracle"]},
        *yaml.safe_load((CONFIGS / "experiments" / "quickstart.yaml").read_text())["benchmarks"][1:]])
    other = plan_of(root)
    iba = {c.name for c in base.cells if c.benchmark == "iba"}
    for stage in ("data", "run", "judge", "score"):
        assert changed(base, other, stage) == iba, stage


def test_a_typo_in_agent_params_names_the_file_and_key(tmp_path):
    """Every registered component validates its params: a typo fails before any model starts."""
    root = tree(tmp_path)
    edit(root / "agents" / "iba-rag.yaml", params__top_kk=3)
    with pytest.raises(ConfigError) as err:
        plan_of(root)
    text = str(err.value)
    assert str(root / "agents" / "iba-rag.yaml") in text and "params.top_kk" in text and "unknown key" in text
    edit(root / "agents" / "iba-rag.yaml", params__top_kk=None)
    data = yaml.safe_load((root / "agents" / "iba-rag.yaml").read_text())
    del data["params"]["top_kk"]
    data["params"]["top_k"] = "three"
    (root / "agents" / "iba-rag.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="params.top_k"):
        plan_of(root)


@pytest.mark.parametrize("folder,file,change,key", [
    ("judges", "smollm2-judge", {"params": {"iba.checkpoint": {"max_tokenz": 1}}}, "params.iba.checkpoint.max_tokenz"),
    ("retrievers", "minilm", {"params": {"embedder": {"model": "x"}, "indx": {}}}, "params.indx"),
    ("retrievers", "minilm", {"kind": "sparse-magic"}, "kind"),
    ("experiments", "quickstart", {"benchmarks": [{"name": "apeb", "params": {"delta": 3}, "agents": ["apeb-oracle"]}]},
     "benchmarks.0.params.delta"),
])
def test_every_component_kind_validates_its_params(tmp_path, folder, file, change, key):
    root = tree(tmp_path)
    path = root / folder / f"{file}.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(change)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        plan_of(root)
    assert key in str(err.value)


def test_judges_name_what_really_produced_the_number(base):
    by_benchmark = {}
    for c in base.cells:
        by_benchmark.setdefault(c.benchmark, set()).add((c.judge, c.judge_model))
    assert by_benchmark == {"iba": {("smollm2-judge", "smollm2-135m"), ("iba.slots", None)},
                            "bespoke": {("smollm2-judge", "smollm2-135m")},
                            "apeb": {("apeb.ranking", None)}, "lamp": {("lamp.rule", None)}}
    iba = next(c for c in base.cells if c.benchmark == "iba" and c.judge == "smollm2-judge")
    assert iba.judged.judge.kinds == ("iba.checkpoint",)
    bespoke = next(c for c in base.cells if c.benchmark == "bespoke")
    assert bespoke.judged.judge.kinds == ("bespoke.recall", "bespoke.criteria")



def test_an_agents_prompt_version_moves_its_run_keys_from_the_first_change_on():
    """IBA-Agent's salience and rating prompts changed (prompt version 2): its run outputs are keyed on it, so a
    re-run recomputes them; an agent still at version 1 keeps the keys it always had."""
    from dataclasses import replace

    from perseval.pipeline.plan import run_key
    from perseval.llm.settings import ModelConfig
    from perseval.experiment.config import AgentConfig, load_config
    from perseval.experiment.load import agent_spec

    spec = {name: agent_spec(load_config(AgentConfig, shipped_config("agents", name)), name)
            for name in ("iba-agent", "iba-rag")}
    assert (spec["iba-agent"].prompt_version, spec["iba-rag"].prompt_version) == (2, 1)
    model = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")
    rag = spec["iba-rag"]
    keys = {v: run_key("d", "i", replace(rag, prompt_version=v), model, 1, 42) for v in (1, 2, 3)}
    assert len(set(keys.values())) == 3  # each version its own outputs
    # version 1 adds nothing to the key: the key of the same spec made before the field existed
    from perseval.core.hashing import content_key
    from perseval.pipeline import stages
    from perseval.pipeline.plan import model_fingerprint
    before = content_key(*stages.RUN.key_head, "d", "i", rag.name, rag.kind, rag.params.model_dump(mode="json"),
                         model_fingerprint(model, model.sampling), 1, 42)
    assert keys[1] == before
