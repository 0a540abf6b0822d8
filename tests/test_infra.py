"""The infra/ examples are valid: Python compiles, YAML parses into the configs they are presets of, shell
scripts pass `bash -n`."""
from __future__ import annotations

import py_compile
import subprocess

import pytest
import yaml

from perseval.config import DeploymentConfig

from .conftest import REPO

INFRA = REPO / "infra"


@pytest.mark.parametrize("path", sorted(INFRA.rglob("*.py")), ids=lambda p: p.name)
def test_python_examples_compile(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)


@pytest.mark.parametrize("path", sorted((INFRA / "vllm").glob("*.yaml")), ids=lambda p: p.name)
def test_vllm_presets_are_deployments(path):
    dep = DeploymentConfig.model_validate({"name": path.stem, **yaml.safe_load(path.read_text())})
    assert dep.kind == "vllm"


@pytest.mark.parametrize("path", sorted(INFRA.rglob("*.sh")), ids=lambda p: p.name)
def test_shell_scripts_parse(path):
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
