"""Experiment-level overrides: applied once when the experiment resolves, validated by each component's own
Params (errors name the experiment file and the `overrides.` key), and what they set is what the plan keys
on and what an agent sends."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from perseval.agents.base import AgentContext
from perseval.benchmarks.actions import ActionFormat
from perseval.experiment.components import make_agent
from perseval.experiment.load import bound, judge_specs
from perseval.experiment.load import load_experiment
from perseval.core.errors import ConfigError
from perseval.pipeline.plan import make_plan
from perseval.core.instances import Instance, Passage
from perseval.report.show import at_path, effective_settings
from tests.conftest import CONFIGS, copy_configs
from tests.scripted import ScriptedChat

QUICKSTART = CONFIGS / "experiments" / "quickstart.yaml"

# The quickstart's run and judge keys on main before budgets moved to the experiment (computed there with
# make_plan). The CPU configs restore their small budgets under `overrides:`, so nothing they compute moved.
# A deliberate change of a stage version or of what the quickstart runs re-pins these (and says so).
QUICKSTART_KEYS = {
    "apeb/apeb-direct/smollm2-135m/-/apeb.ranking": ("aa713995e15fa2d6", "d4e2c5f047a42ecf"),
    "apeb/apeb-no-history/smollm2-135m/-/apeb.ranking": ("cf0e07cfc690df72", "a56e994098a7bff6"),
    "apeb/apeb-oracle/-/-/apeb.ranking": ("a6c327ed97378c84", "98189f9255948fef"),
    "bespoke/bespoke-no-context/smollm2-135m/minilm/smollm2-judge": ("9016847bfdec565c", "27b86121b0d8a352"),
    "bespoke/bespoke-raw-history/smollm2-135m/minilm/smollm2-judge": ("a76a5a12555ed4cb", "5cdbb06dc1dacb24"),
    "iba/iba-no-history/smollm2-135m/-/iba.slots": ("79731872710797fb", "699cccf245b73530"),
    "iba/iba-no-history/smollm2-135m/-/smollm2-judge": ("79731872710797fb", "3537bb5286869e35"),
    "iba/iba-oracle/-/-/iba.slots": ("3f28b38706ab618b", "799f8c9f827bc884"),
    "iba/iba-oracle/-/-/smollm2-judge": ("3f28b38706ab618b", "1c0536ff3b1f455a"),
    "iba/iba-rag/smollm2-135m/minilm/iba.slots": ("14eee880ff9980af", "5a37fa2fb94531bd"),
    "iba/iba-rag/smollm2-135m/minilm/smollm2-judge": ("14eee880ff9980af", "80c68c4f6945b3b7"),
}


def test_the_quickstart_keys_are_those_of_main():
    plan = make_plan(load_experiment(QUICKSTART))
    got = {c.name: (c.run.key, c.judged.key) for c in plan.cells}
    assert {n: got.get(n) for n in QUICKSTART_KEYS} == QUICKSTART_KEYS


def _tree(tmp_path: Path, overrides: dict | None, name: str = "t") -> Path:
    """A copy of the shipped configs whose quickstart has `overrides` (None: none at all)."""
    root = tmp_path / name / "configs"
    copy_configs(root)
    exp = root / "experiments" / "quickstart.yaml"
    data = yaml.safe_load(exp.read_text())
    data.pop("overrides", None)
    if overrides is not None:
        data["overrides"] = overrides
    exp.write_text(yaml.safe_dump(data))
    return exp


def _write_agent(exp: Path, name: str, **params) -> None:
    path = exp.parents[1] / "agents" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    data["params"].update(params)
    path.write_text(yaml.safe_dump(data))


def test_an_override_equal_to_the_yaml_value_gives_the_same_keys(tmp_path):
    """The YAML holding the CPU values and no override, or the YAML holding the paper's and an override
    restoring the CPU values: one effective param set, so one set of keys."""
    in_yaml = _tree(tmp_path, None, "yaml")
    _write_agent(in_yaml, "iba-rag", max_tokens=192, json_max_tokens=64, passage_chars=600)
    _write_agent(in_yaml, "iba-no-history", max_tokens=192, json_max_tokens=64)
    _write_agent(in_yaml, "apeb-direct", history_items=30)
    judge = in_yaml.parents[1] / "judges" / "smollm2-judge.yaml"
    judge.write_text(yaml.safe_dump({**yaml.safe_load(judge.read_text()), "reasons": False}))
    a = make_plan(load_experiment(in_yaml))
    b = make_plan(load_experiment(QUICKSTART))
    assert {c.name: c.key for c in a.cells} == {c.name: c.key for c in b.cells}


def test_an_override_reaches_only_what_it_changes(tmp_path):
    base = make_plan(load_experiment(QUICKSTART))
    quick = yaml.safe_load(QUICKSTART.read_text())["overrides"]
    quick["agents"]["iba-rag"]["max_tokens"] = 200
    quick["judges"] = {"smollm2-judge": {"sampling": {"max_tokens": 97}}}
    exp = load_experiment(_tree(tmp_path, quick))
    other = make_plan(exp)
    a, b = ({c.name: c for c in p.cells} for p in (base, other))
    run_changed = {n for n in a if a[n].run.key != b[n].run.key}
    judge_changed = {n for n in a if a[n].judged.key != b[n].judged.key}
    assert run_changed == {n for n in a if a[n].agent == "iba-rag"}
    assert judge_changed == run_changed | {n for n in a if a[n].judge == "smollm2-judge"}
    assert exp.judges["smollm2-judge"].sampling.max_tokens == 97
    assert exp.judges["smollm2-judge"].sampling.temperature == 0.0  # merged, not replaced


def test_a_model_and_a_judge_params_override(tmp_path):
    exp = load_experiment(_tree(tmp_path, {
        "models": {"smollm2-135m": {"sampling": {"max_tokens": 111}}},
        "judges": {"smollm2-judge": {"params": {"iba.checkpoint": {"response_chars": 50}}, "repeats": 2}}}))
    assert exp.models["smollm2-135m"].sampling.max_tokens == 111
    spec = next(s for s in judge_specs(exp, 0) if s.name == "smollm2-judge")
    assert spec.params["iba.checkpoint"].response_chars == 50 and spec.repeats == 2


@pytest.mark.parametrize("overrides, needles", [
    ({"agents": {"iba-rag": {"max_tokens": "lots"}}}, ["overrides.agents.iba-rag.max_tokens"]),
    ({"agents": {"iba-rag": {"max_tokenz": 3}}}, ["overrides.agents.iba-rag.max_tokenz", "unknown key"]),
    ({"agents": {"iba-agnet": {"max_tokens": 3}}}, ["overrides.agents.iba-agnet", "no agent", "iba-rag"]),
    ({"judges": {"smollm2-judge": {"sampling": {"max_tokens": 0}}}},
     ["overrides.judges.smollm2-judge.sampling.max_tokens"]),
    ({"judges": {"smollm2-judge": {"params": {"iba.nope": {}}}}}, ["overrides.judges.smollm2-judge.params.iba.nope"]),
    ({"judges": {"smollm2-judge": {"params": {"iba.checkpoint": {"response_chars": 0}}}}},
     ["overrides.judges.smollm2-judge.params.iba.checkpoint.response_chars"]),
    ({"models": {"smollm2-135m": {"sampling": {"temperature": "hot"}}}},
     ["overrides.models.smollm2-135m.sampling.temperature"]),
    ({"agentz": {}}, ["overrides.agentz"]),
])
def test_a_bad_override_names_the_experiment_file_and_the_key(tmp_path, overrides, needles):
    exp = _tree(tmp_path, overrides)
    with pytest.raises(ConfigError) as err:
        load_experiment(exp)
    assert str(exp) in str(err.value) and all(n in str(err.value) for n in needles), str(err.value)


def test_a_model_an_override_names_for_an_agent_role_is_loaded(tmp_path):
    """An override giving an agent a model of its own (the Bespoke profiler) loads that model like any other."""
    def tree(model: str, name: str) -> Path:
        exp = _tree(tmp_path, {"agents": {"bespoke-static-profile": {"profiler_model": model}}}, name)
        data = yaml.safe_load(exp.read_text())
        data["benchmarks"][1]["agents"] = ["bespoke-static-profile"]
        data["benchmarks"][1].pop("baseline", None)  # the quickstart's baseline agent is no longer listed
        exp.write_text(yaml.safe_dump(data))
        return exp

    exp = load_experiment(tree("qwen3-4b-instruct", "a"))
    assert "qwen3-4b-instruct" in exp.models and exp.deployments["qwen3-4b-instruct"].kind == "vllm"
    with pytest.raises(ConfigError, match="overrides.agents.bespoke-static-profile.profiler_model"):
        load_experiment(tree("no-such-model", "b"))


def test_an_override_of_an_agent_the_experiment_does_not_run_is_ignored(tmp_path):
    """A copy of the quickstart trimmed to fewer agents keeps its overrides (a name that exists nowhere fails
    above)."""
    exp = _tree(tmp_path, yaml.safe_load(QUICKSTART.read_text())["overrides"])
    data = yaml.safe_load(exp.read_text())
    data["benchmarks"] = [{**data["benchmarks"][0], "agents": ["iba-oracle"], "baseline": None}]
    exp.write_text(yaml.safe_dump(data))
    assert set(load_experiment(exp).agents) == {"iba-oracle"}


def test_what_show_prints_is_what_the_agent_sends(tmp_path):
    """The effective budget and passage clip of iba-rag under the quickstart's overrides, read from
    `effective_settings`, are the max_tokens and passage length the agent really sends."""
    exp = load_experiment(QUICKSTART)
    params = at_path(effective_settings(exp), "benchmarks/iba/agents/iba-rag/params")
    assert (params["max_tokens"], params["passage_chars"]) == (192, 600)
    agent = make_agent(bound(exp).agents["iba-rag"])
    llm = ScriptedChat("a plan")
    passage = Passage("d1", 0, "x" * 900, 1.0)

    async def retrieve(user: str, query: str, k: int) -> list[Passage]:
        return [passage]

    inst = Instance("i1", "iba", "u1", "Planning", "Plan my week.", {"action_type": "generate"})
    asyncio.run(agent.act(inst, AgentContext(llm=llm, retrieve=retrieve, request_format=ActionFormat()), 0, "iba-rag"))
    sent = llm.calls[0]
    assert sent["max_tokens"] == params["max_tokens"]
    assert "x" * params["passage_chars"] in sent["messages"][-1]["content"]
    assert "x" * (params["passage_chars"] + 1) not in sent["messages"][-1]["content"]
