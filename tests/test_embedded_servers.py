"""The embedded servers without starting one: launch commands as each server reads them, slots and client
concurrency sized to the cores, the llama-server binary found (or a clear error before anything starts),
settings refused where no server reads them, and serving choices that change no key."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import perseval_flows.cli
from perseval_flows.cli import app
from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.config import load_config
from perseval.core.errors import ConfigError
from perseval.experiment.load import load_experiment
from perseval.llm import deployments, embedded
from perseval.llm.cache import request_key
from perseval.llm.client import key_format
from perseval.llm.deployments import Deployment
from perseval.llm.embedded import (LLAMA_SERVER_ENV, concurrency, cores, embedded_command, llama_server_binary,
                                   slots)
from perseval.pipeline.plan import make_plan
from perseval.report.show import effective_settings

from .conftest import CONFIGS

MODEL = ModelConfig(name="tiny", format="gguf", source="x.gguf", deployment="d")
SMOLLM = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")


def _flag(cmd: list[str], flag: str) -> str:
    assert cmd.count(flag) == 1, cmd
    return cmd[cmd.index(flag) + 1]


@pytest.fixture()
def binary(tmp_path, monkeypatch) -> Path:
    """An executable named llama-server that $PERSEVAL_LLAMA_SERVER points at."""
    path = tmp_path / "bin" / "llama-server"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\necho 'version: test'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(path))
    return path


def test_llama_server_gets_one_slot_unless_told_a_per_slot_context_and_every_core(binary):
    dep = DeploymentConfig(name="d", kind="embedded", context_length=3000)
    cmd = embedded_command(MODEL, dep, Path("w.gguf"), 8123)
    assert cmd[0] == str(binary) and _flag(cmd, "--model") == "w.gguf" and _flag(cmd, "--host") == "127.0.0.1"
    assert _flag(cmd, "--parallel") == str(embedded.DEFAULT_SLOTS) == str(slots(dep)) == "1"
    assert "--no-kv-unified" in cmd and _flag(cmd, "--ctx-size") == str(3000 * slots(dep))  # 3000 per request
    assert _flag(cmd, "--threads") == _flag(cmd, "--threads-batch") == str(cores())
    assert _flag(cmd, "--alias") == "tiny"  # the name requests carry as `model`
    assert _flag(cmd, "--flash-attn") == "off"  # as llama-cpp-python computes attention
    pinned = embedded_command(MODEL, dep.model_copy(update={"parallel": 3, "n_threads": 1}), Path("w.gguf"), 1)
    assert _flag(pinned, "--parallel") == "3" and _flag(pinned, "--threads") == "1"


def test_the_llama_cpp_python_server_stays_a_deployment_choice():
    dep = DeploymentConfig(name="d", kind="embedded", server="llama-cpp-python")
    cmd = embedded_command(MODEL, dep, Path("w.gguf"), 8123)
    assert cmd[:3] == [sys.executable, "-m", "llama_cpp.server"] and _flag(cmd, "--n_ctx") == "4096"
    assert _flag(cmd, "--n_threads") == _flag(cmd, "--n_threads_batch") == str(cores())
    assert slots(dep) == 1 and concurrency(dep) == 2


@pytest.mark.parametrize("values,expected", [
    ({}, 2),  # one decoding, one queued in the server
    ({"parallel": 3}, 4),
    ({"parallel": 3, "max_concurrency": 7}, 7),  # the deployment's own number wins
    ({"server": "llama-cpp-python"}, 2),
])
def test_a_client_keeps_as_many_requests_in_flight_as_the_server_decodes(values, expected, binary, tmp_path):
    dep = DeploymentConfig(name="d", kind="embedded", **values)
    endpoint = Deployment(SMOLLM, dep, tmp_path)._endpoint("http://127.0.0.1:1/v1", "tiny")
    assert endpoint.max_concurrency == expected == concurrency(dep)
    assert endpoint.extra_body == {"repeat_penalty": embedded.REPEAT_PENALTY}


def test_other_kinds_keep_their_concurrency_and_send_no_extra_fields(tmp_path):
    vllm = Deployment(ModelConfig(name="m", format="hf", source="org/m", deployment="v"),
                      DeploymentConfig(name="v", kind="vllm"), tmp_path)._endpoint("http://127.0.0.1:1/v1", "m")
    assert vllm.max_concurrency == 4 and vllm.extra_body == {}


@pytest.mark.parametrize("values", [{}, {"parallel": 3, "n_threads": 1}, {"server": "llama-cpp-python"}])
def test_show_prints_the_serving_values_the_client_really_gets(values, binary, tmp_path):
    """`perseval show`'s serving section is made by the same resolution the deployment's endpoint uses."""
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    dep = exp.deployments["smollm2-135m"].model_copy(update=values)
    exp.deployments["smollm2-135m"] = dep
    shown = effective_settings(exp)["models"]["smollm2-135m"]["serving"]
    endpoint = Deployment(SMOLLM, dep, tmp_path)._endpoint("http://127.0.0.1:1/v1", "tiny")
    assert (shown["max_concurrency"], shown["structured_output"], shown["extra_body"], shown["prefix_first"]) == \
        (endpoint.max_concurrency, endpoint.structured_output, endpoint.extra_body, endpoint.prefix_first)
    cmd = embedded_command(SMOLLM, dep, Path("w.gguf"), 8123)
    threads_flag = "--threads" if shown["server"] == "llama-server" else "--n_threads"
    assert _flag(cmd, threads_flag) == str(shown["threads"])
    if shown["server"] == "llama-server":
        assert _flag(cmd, "--parallel") == str(shown["slots"])


def test_the_binary_is_found_beside_this_python_on_path_or_named(tmp_path, monkeypatch):
    monkeypatch.delenv(LLAMA_SERVER_ENV, raising=False)
    fake_python = tmp_path / "venv" / "bin" / "python"
    fake_python.parent.mkdir(parents=True)
    monkeypatch.setattr(embedded.sys, "executable", str(fake_python))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError) as err:
        llama_server_binary()
    assert "llama-server not found" in str(err.value) and "make install" in str(err.value)
    assert "server: llama-cpp-python" in str(err.value)
    beside = fake_python.parent / "llama-server"
    beside.write_text("#!/bin/sh\n")
    beside.chmod(0o755)
    assert llama_server_binary() == beside
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=f"\\${LLAMA_SERVER_ENV}=.*nowhere is not an executable file"):
        llama_server_binary()


@pytest.mark.parametrize("field,value", [("server", "llama-cpp-python"), ("parallel", 4), ("n_threads", 2)])
def test_embedded_settings_on_another_kind_are_refused_naming_the_key(field, value, tmp_path):
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({"name": "gpu", "kind": "vllm", field: value}))
    with pytest.raises(ConfigError) as err:
        load_config(DeploymentConfig, path)
    assert "gpu.yaml" in str(err.value) and field in str(err.value) and "only an embedded deployment" in str(err.value)


def test_an_unknown_server_names_the_two_allowed(tmp_path):
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump({"name": "cpu", "kind": "embedded", "server": "ollama"}))
    with pytest.raises(ConfigError) as err:
        load_config(DeploymentConfig, path)
    assert "key 'server'" in str(err.value) and "'llama-server' or 'llama-cpp-python'" in str(err.value)


def _keys(exp) -> list[str]:
    plan = make_plan(exp)
    return [u.key for u in plan.runs()] + [u.key for u in plan.judgings()] + [c.key for c in plan.cells]


@pytest.mark.parametrize("update", [{"server": "llama-cpp-python"}, {"parallel": 8, "max_concurrency": 16},
                                    {"n_threads": 1}])
def test_serving_choices_enter_no_stage_key_and_no_request_key(update):
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    before = _keys(exp)
    for name, dep in exp.deployments.items():
        exp.deployments[name] = dep.model_copy(update=update)
    assert _keys(exp) == before
    schema = {"type": "object"}
    # the request key takes the kind's dialect, never the server's: one key whichever server answers
    assert key_format("embedded", schema) == {"type": "json_object", "schema": schema}
    a = request_key("gguf:x", [{"role": "user", "content": "hi"}], {"temperature": 0.0}, 1, 0,
                    {"response_format": key_format("embedded", schema), "tools": None})
    assert a == request_key("gguf:x", [{"role": "user", "content": "hi"}], {"temperature": 0.0}, 1, 0,
                            {"response_format": key_format(exp.deployments["smollm2-135m"].kind, schema),
                             "tools": None})


def test_validate_refuses_a_missing_llama_server_before_anything_starts(tmp_path, monkeypatch):
    """The shipped quickstart on a machine without the binary: one line naming the deployment YAML, the key
    and both ways out; no flow, no server."""
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(tmp_path / "missing"))
    monkeypatch.chdir(tmp_path)
    started: list = []
    monkeypatch.setattr(perseval_flows.cli, "_run_flow", lambda *a, **k: started.append(a))
    monkeypatch.setattr(deployments, "start_server", lambda *a, **k: started.append(a))
    for command in ("validate", "run"):
        result = CliRunner().invoke(app, [command, str(CONFIGS / "experiments" / "quickstart.yaml")])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert "smollm2-135m-cpu.yaml: key 'server': llama-server:" in lines[0] and "missing" in lines[0]
    assert not started


def test_the_shipped_llama_cpp_python_deployment_validates_without_the_binary(tmp_path, monkeypatch, configs):
    """`server: llama-cpp-python` needs no llama-server: a model pointed at it loads where none is built."""
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(tmp_path / "missing"))
    model = configs / "models" / "smollm2-135m.yaml"
    spec = yaml.safe_load(model.read_text())
    model.write_text(yaml.safe_dump({**spec, "deployment": "smollm2-135m-cpu-llama-cpp-python"}))
    exp = load_experiment(configs / "experiments" / "quickstart.yaml")
    assert {d.server for d in exp.deployments.values()} == {"llama-cpp-python"}


def test_validate_says_how_to_install_llama_cpp_python_where_it_is_missing(tmp_path, configs):
    """llama-cpp-python is an optional extra: a deployment on its server, in a Python where the package cannot be
    imported, is refused at validate with one line naming the YAML, the key and the install command."""
    model = configs / "models" / "smollm2-135m.yaml"
    spec = yaml.safe_load(model.read_text())
    model.write_text(yaml.safe_dump({**spec, "deployment": "smollm2-135m-cpu-llama-cpp-python"}))
    # None in sys.modules makes every `import llama_cpp` fail, as where the extra was never installed
    code = ("import sys; sys.modules['llama_cpp'] = None; sys.argv = ['perseval', 'validate', sys.argv[1]]; "
            "from perseval_flows.cli import app; app()")
    proc = subprocess.run([sys.executable, "-c", code, str(configs / "experiments" / "quickstart.yaml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, out[-2000:]
    assert "smollm2-135m-cpu-llama-cpp-python.yaml: key 'server': llama-cpp-python:" in out
    assert "pip install -e '.[llama-cpp]'" in out


def _build_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("build", Path(__file__).parents[1] / "infra" / "llama-server" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


def test_the_build_script_keys_its_cache_on_version_flags_and_patches(monkeypatch):
    build = _build_script()
    a = build.cache_dir("0.3.36", ["-DGGML_AVX2=ON"])
    assert a != build.cache_dir("0.3.37", ["-DGGML_AVX2=ON"]) and a != build.cache_dir("0.3.36", ["-DGGML_AVX2=OFF"])
    monkeypatch.setattr(build, "PATCHES", [])
    assert build.cache_dir("0.3.36", ["-DGGML_AVX2=ON"]) != a  # an unpatched build is another binary


def test_the_build_patches_the_vendored_server_once_or_says_the_source_changed(tmp_path):
    build = _build_script()
    [(name, text, replacement)] = build.PATCHES
    source = tmp_path / "llama.cpp"
    (source / name).parent.mkdir(parents=True)
    (source / name).write_text(f"void init() {{\n    {text}\n}}\n")
    build.patch(source)
    assert text not in (source / name).read_text() and replacement in (source / name).read_text()
    with pytest.raises(SystemExit) as err:  # patched already, or a llama.cpp that moved the line
        build.patch(source)
    assert "found 0" in str(err.value) and "update PATCHES" in str(err.value)


def test_the_build_pins_the_sdist_of_the_llama_cpp_extra_and_the_default_install_compiles_nothing_else():
    """llama-server is built from the llama.cpp that the `[llama-cpp]` extra's version vendors (both servers run
    the same ggml code), without llama-cpp-python installed; the default dependencies hold no llama-cpp-python,
    and `make test` installs the extra (some tests run both servers)."""
    import tomllib

    build = _build_script()
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["llama-cpp"] == [f"llama-cpp-python[server]=={build.SOURCE_VERSION}"]
    assert not [d for d in project["dependencies"] if d.startswith("llama-cpp-python")]
    assert "importlib.metadata" not in (Path(__file__).parents[1] / "infra" / "llama-server" / "build.py").read_text()
    dry = subprocess.run(["make", "-n", "-B", "test"], cwd=Path(__file__).parents[1], capture_output=True,
                         text=True, timeout=60)
    assert "pip install -e '.[dev,llama-cpp]'" in dry.stdout, dry.stdout + dry.stderr
