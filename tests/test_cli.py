"""The command line: every command has --help; `agreement` reports B.1's numbers."""
import csv
import json

import pytest
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.experiment.load import experiment_file

runner = CliRunner()


@pytest.mark.parametrize("command", ["run", "validate", "construct", "stats", "compare", "ui", "deploy", "iba agreement",
                                     "iba label-sample", "iba"])
def test_every_command_has_help(command):
    result = runner.invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


def _labels(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["instance_id", "reasonableness", "coherence", "persona_consistency"])
        w.writerows(rows)
    return str(path)


def test_agreement_reports_raw_agreement_and_ac1(tmp_path):
    # reasonableness: rater a all 1, rater b three 0s in 20 -> agreement 0.85,
    # pi = 37/40 = 0.925, Pe = 2 pi (1 - pi) = 0.13875, AC1 = (0.85 - Pe) / (1 - Pe) = 0.826
    a = _labels(tmp_path / "a.csv", [(f"i{i}", 1, 1, 1) for i in range(20)])
    b = _labels(tmp_path / "b.csv", [(f"i{i}", 0 if i % 7 == 0 else 1, 1, 1) for i in range(20)])
    result = runner.invoke(app, ["iba", "agreement", a, b])
    assert result.exit_code == 0, result.output
    line = next(l for l in result.output.splitlines() if l.startswith("| reasonableness"))
    assert "0.850" in line and "0.826" in line


def test_agreement_names_the_bad_cell(tmp_path):
    a = _labels(tmp_path / "a.csv", [("i0", 1, 1, 1), ("i1", "maybe", 1, 1)])
    b = _labels(tmp_path / "b.csv", [("i0", 1, 1, 1), ("i1", 1, 1, 1)])
    result = runner.invoke(app, ["iba", "agreement", a, b])
    assert result.exit_code == 2 and "a.csv" in result.output and "reasonableness" in result.output


def test_validate_checks_everything_without_starting_a_server(tmp_path):
    from .conftest import CONFIGS, shipped_configs

    ok = runner.invoke(app, ["validate", str(CONFIGS / "experiments" / "quickstart.yaml")])
    assert ok.exit_code == 0 and "15 cell(s)" in ok.output  # 11 judged cells, LaMP 4 (a control among them)
    root = shipped_configs(tmp_path)  # the shipped configs, flat: the copy's apeb-direct.yaml wins
    (root / "experiments" / "quickstart.yaml").write_text((CONFIGS / "experiments" / "quickstart.yaml").read_text())
    agent = root / "agents" / "apeb-direct.yaml"
    agent.write_text(agent.read_text().replace("history_items: null", "history_itmes: null"))
    bad = runner.invoke(app, ["validate", str(root / "experiments" / "quickstart.yaml")])
    assert bad.exit_code == 2 and "apeb-direct.yaml" in bad.output and "history_itmes" in bad.output
    assert "Traceback" not in bad.output


def test_label_sample_refuses_what_it_cannot_sample_before_building_anything(tmp_path):
    from .conftest import CONFIGS

    no_iba = runner.invoke(app, ["iba", "label-sample", str(experiment_file("apeb_cpu")),
                                 "--out-dir", str(tmp_path / "l")])
    assert no_iba.exit_code == 2 and "no iba benchmark entry" in no_iba.output
    unknown = runner.invoke(app, ["iba", "label-sample", str(experiment_file("iba_cpu")), "--model", "gpt-x",
                                  "--out-dir", str(tmp_path / "l")])
    assert unknown.exit_code == 2 and "'gpt-x' is not a model" in unknown.output and "smollm2-135m" in unknown.output
    assert not (tmp_path / "l").exists()


def test_show_prints_the_effective_settings_as_json_and_starts_nothing(tmp_path):
    """`perseval show --json`: what each cell will send after the experiment's overrides (the quickstart's
    CPU budgets over the agent YAMLs' paper ones), one row per cell with its keys."""
    from perseval.experiment.load import load_experiment
    from perseval.pipeline.plan import make_plan

    from .conftest import CONFIGS

    config = CONFIGS / "experiments" / "quickstart.yaml"
    result = runner.invoke(app, ["show", str(config), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["benchmarks"]["iba"]["agents"]["iba-rag"]["params"]["max_tokens"] == 192
    assert shown["benchmarks"]["apeb"]["agents"]["apeb-direct"]["params"]["history_items"] == 30
    assert shown["models"]["smollm2-135m"]["deployment"]["kind"] == "embedded"
    plan = make_plan(load_experiment(config))
    assert {c["name"]: c["run_key"] for c in shown["cells"]} == {c.name: c.run.key for c in plan.cells}
    plain = runner.invoke(app, ["show", str(config)])
    assert plain.exit_code == 0 and "iba-rag:" in plain.output and "max_tokens: 192" in plain.output


class _Exec(Exception):
    """What `ui` would have exec'd (the test process must not become the MLflow server)."""


def _no_exec(monkeypatch):
    def fake(path, args, env):
        raise _Exec(args)

    monkeypatch.setattr("perseval_flows.cli.os.execve", fake)


def test_ui_refuses_a_folder_without_a_store_unless_asked_to_create_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _no_exec(monkeypatch)
    refused = runner.invoke(app, ["ui"])
    db = tmp_path / "mlruns" / "mlflow.db"
    assert refused.exit_code == 2 and str(db) in refused.output and "--create" in refused.output
    assert not (tmp_path / "mlruns").exists()  # nothing made
    created = runner.invoke(app, ["ui", "--create", "--port", "5123"])
    assert isinstance(created.exception, _Exec), created.output
    args = created.exception.args[0]
    assert args[args.index("--backend-store-uri") + 1] == f"sqlite:///{db}" and args[args.index("--port") + 1] == "5123"
    assert f"MLflow store: sqlite:///{db}" in created.output.replace("\n", "")


def test_ui_says_which_existing_store_it_opens(tmp_path, monkeypatch):
    db = tmp_path / "elsewhere" / "m.db"
    db.parent.mkdir()
    db.write_bytes(b"")
    _no_exec(monkeypatch)
    opened = runner.invoke(app, ["ui", "--tracking-uri", f"sqlite:///{db}"])
    assert isinstance(opened.exception, _Exec) and f"MLflow store: sqlite:///{db}" in opened.output.replace("\n", "")
    assert "new, empty" not in opened.output


def test_show_path_prints_one_effective_value_and_names_a_wrong_path():
    """`perseval show --path` answers "what will this setting be after every override" with the value alone; a path
    that is not there is one line and exit 2."""
    from typer.testing import CliRunner

    from perseval_flows.cli import app

    quick = "configs/experiments/quickstart.yaml"
    shown = CliRunner().invoke(app, ["show", quick, "--json", "--path", "benchmarks"])
    assert shown.exit_code == 0, shown.output
    first = sorted(json.loads(shown.output))[0]
    one = CliRunner().invoke(app, ["show", quick, "--json", "--path", f"/benchmarks/{first}/"])
    assert one.exit_code == 0 and json.loads(one.output) == json.loads(shown.output)[first]
    bad = CliRunner().invoke(app, ["show", quick, "--path", "benchmarks/no-such-benchmark"])
    assert bad.exit_code == 2 and "--path benchmarks/no-such-benchmark: no such setting" in bad.output
