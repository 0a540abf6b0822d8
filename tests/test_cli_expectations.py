"""The command line as people expect it (issue 24): `perseval --version`, `run --sample N` as `deploy` has,
help for every option of `ui`, the exit codes in `--help`, arguments written `CONFIG`, and no flag shown
as taking a value (`--help <bool>`)."""
from __future__ import annotations

import re
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

import perseval_flows.cli
from perseval_flows.cli import app

from .conftest import CONFIGS

runner = CliRunner()
COMMANDS = ["run", "validate", "construct", "stats", "agreement", "ui", "deploy"]


def _flat(text: str) -> str:
    """Help text without the panels' frames and line breaks (rich wraps it at the terminal's width)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"perseval {version('perseval')}", result.output


def test_run_takes_sample_as_deploy_does(monkeypatch):
    seen: dict = {}

    def flow(config, exp, output_root, **kwargs):
        seen.update(kwargs)
        raise typer.Exit(0)  # the flow itself is not what is tested here

    monkeypatch.setattr(perseval_flows.cli, "_run_flow", flow)
    quickstart = str(CONFIGS / "experiments" / "quickstart.yaml")
    assert runner.invoke(app, ["run", quickstart, "--sample", "3", "--quiet"]).exit_code == 0
    assert seen["sample"] == 3 and seen["show_progress"] is False
    refused = runner.invoke(app, ["run", quickstart, "--sample", "0"])
    assert refused.exit_code == 2 and "--sample" in refused.output and not seen.get("sample") == 0


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"]])
def test_the_exit_codes_are_in_the_help(args):
    text = _flat(runner.invoke(app, args).output)
    for code in ("0 done", "2 bad input", "3 incomplete", "4 late failure"):
        assert code in text, text


@pytest.mark.parametrize("command", COMMANDS)
def test_arguments_read_as_names_and_flags_take_no_value(command):
    text = runner.invoke(app, [command, "--help"]).output
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "<bool>" not in text and "--no-" not in text, text
    if command not in ("ui", "agreement"):
        assert usage.split()[-1] == "CONFIG", usage


def test_every_option_of_ui_says_what_it_is():
    text = _flat(runner.invoke(app, ["ui", "--help"]).output)
    assert "--port <int range> [1<=x<=65535] the port on 127.0.0.1 the UI listens on" in text, text
    assert "--tracking-uri <str> the MLflow store to open" in text, text
