"""`perseval list` names what is registered and shipped; wrong names get the closest known ones."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.core.errors import ConfigError
from perseval.core.suggest import closest, suggestion
from perseval.kernel.registry import manifest_index
from perseval.experiment.load import experiment_file
from perseval.experiment.listing import config_files


def test_list_agents_names_every_registered_agent_and_config() -> None:
    out = CliRunner().invoke(app, ["list", "agents"], terminal_width=400)
    assert out.exit_code == 0, out.output
    names = {line.split("  ")[0] for line in out.output.splitlines() if line.strip()}
    registered = {name for (registry, name) in manifest_index() if registry == "AGENTS"}
    assert registered and registered <= names
    assert {p.stem for p in config_files("agents")} <= names


def test_list_benchmarks_points_at_each_cpu_experiment() -> None:
    out = CliRunner().invoke(app, ["list", "benchmarks"], terminal_width=400)
    assert out.exit_code == 0, out.output
    assert "lamp/configs/experiments/lamp_cpu.yaml" in out.output


def test_list_wrong_kind_suggests() -> None:
    out = CliRunner().invoke(app, ["list", "agnets"])
    assert out.exit_code == 2 and "did you mean 'agents'" in out.output


def test_suggestion_closest_or_the_known_list() -> None:
    assert closest("quikstart", ["quickstart", "gpu"]) == ["quickstart"]
    assert suggestion("zzzz", ["b", "a"]) == "known: 'a', 'b'"


def test_typoed_experiment_names_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'quickstart'"):
        experiment_file("quikstart")
    out = CliRunner().invoke(app, ["validate", "quikstart"])
    assert out.exit_code == 2 and "did you mean 'quickstart'" in out.output


def test_wrong_component_name_in_yaml_suggests(tmp_path) -> None:
    from perseval.experiment.load import load_experiment

    text = (experiment_file("lamp_cpu").read_text().replace("backbones: [smollm2-135m]", "backbones: [smollm2-13m]"))
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="did you mean 'smollm2-135m'"):
        load_experiment(path)
