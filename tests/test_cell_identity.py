"""Issue 47 at unit level: a benchmark entry's name in its cells (label or digest), validate refusing cells that
would share a name, a status that says how much of a cell is scored, the entries with no score, the judge-probe
message, and headline.md keeping the interval level its CSV has."""
from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

from perseval.core.errors import ConfigError
from perseval.pipeline.plan import make_plan
from perseval.pipeline.probes import unprobed
from perseval.report.analyses.status import ScoreManifest
from perseval.report.record import Status, without_score
from perseval.report.sink.tracking import log_table
from perseval.experiment.config import BenchmarkEntry
from perseval.experiment.entries import entry_ids
from perseval.experiment.load import load_experiment

from .conftest import REPO, shipped_configs
from .record_helpers import cell

PREF = {"name": "prefeval", "source": str(REPO / "tests" / "data" / "prefeval"), "sample": 1,
        "params": {"forms": ["explicit"], "tasks": ["generation"], "inter_turns": [1]},
        "agents": ["prefeval-zero-shot"]}


def _experiment(tmp_path: Path, entries: list[dict], **extra) -> Path:
    cfg = shipped_configs(tmp_path)
    path = cfg / "experiments" / "two.yaml"
    path.write_text(yaml.safe_dump({"name": "two", "seed": 5, "backbones": ["smollm2-135m"], "retrievers": ["minilm"],
                                    "judges": ["smollm2-judge"], "benchmarks": entries, **extra}))
    return path


def _cls(**kw) -> dict:
    return {**PREF, "params": {**PREF["params"], "tasks": ["classification"]}, **kw}


# --- names ---------------------------------------------------------------------------------------------------

def test_an_entry_is_named_by_its_label_else_by_a_digest_only_when_its_benchmark_is_listed_twice():
    one = BenchmarkEntry(**PREF)
    assert entry_ids([one, BenchmarkEntry(name="iba", agents=["iba-rag"])]) == ["prefeval", "iba"]
    gen, cls = BenchmarkEntry(**PREF), BenchmarkEntry(**_cls())
    a, b = entry_ids([gen, cls])
    assert a.startswith("prefeval:") and b.startswith("prefeval:") and a != b and len(a) == len("prefeval:") + 6
    assert entry_ids([gen, cls]) == entry_ids([gen, cls])  # stable: a digest of the entry's settings
    assert entry_ids([gen, BenchmarkEntry(**_cls(label="cls"))]) == ["prefeval", "prefeval:cls"]
    with pytest.raises(ValueError, match="label"):
        BenchmarkEntry(**_cls(label="a/b"))  # a label is one plain token: it sits inside cell names and paths


def test_two_entries_of_one_benchmark_get_cells_named_apart_and_a_label_enters_the_key(tmp_path):
    plan = make_plan(load_experiment(_experiment(tmp_path, [PREF, _cls(label="cls")])))
    names = [c.name for c in plan.cells]
    assert len(names) == len(set(names))
    assert {n.split("/")[0] for n in names} == {"prefeval", "prefeval:cls"}
    assert {c.benchmark for c in plan.cells} == {"prefeval"}  # the registry's name stays what builds it
    alone = make_plan(load_experiment(_experiment(tmp_path / "a", [PREF])))
    unlabelled = make_plan(load_experiment(_experiment(tmp_path / "b", [PREF, _cls()])))
    keys = {c.run.data.name: c.run.data.key for c in unlabelled.cells}
    labelled = {c.run.data.name: c.run.data.key for c in plan.cells}
    assert {c.name for c in alone.cells} <= set(names)  # a single unlabelled entry keeps its names ...
    assert labelled["prefeval"] == alone.data[0].key  # ... and its keys
    assert labelled["prefeval:cls"] not in keys.values()  # a set label enters the data key


def test_validate_refuses_cells_that_would_share_a_name_and_says_to_set_a_label(tmp_path):
    same = [{**PREF, "label": "x"}, _cls(label="x")]  # one label on two entries with one agent in common
    with pytest.raises(ConfigError, match=r"benchmarks\.1.*same names.*label:"):
        load_experiment(_experiment(tmp_path, same))
    twice = [PREF, {**PREF, "sample": 2}]  # the same data twice, apart only in sample
    with pytest.raises(ConfigError, match=r"benchmarks\.1.*label:"):
        load_experiment(_experiment(tmp_path / "b", twice))
    ok = [PREF, {**PREF, "sample": 2, "label": "two"}]
    assert len({c.name for c in make_plan(load_experiment(_experiment(tmp_path / "c", ok))).cells}) == 4


# --- status ----------------------------------------------------------------------------------------------------

def _manifest(n: int, unscored: int, failed: int = 0) -> ScoreManifest:
    table = [{"group": "t", "n": n + unscored, "unscored_instances": unscored},  # n: instances judged
             {"group": "Overall", "n": n + unscored, "unscored_instances": unscored}]
    return ScoreManifest.of({"table": table, "outputs": {"ok": n + unscored},
                             "judgments": {"scored": n, "unscored": unscored, "failed": failed}})


@pytest.mark.parametrize("n, unscored, status", [(0, 27, "unscored"), (2, 25, "partly scored"),
                                                 (5, 5, "partly scored"), (26, 1, "partly scored"), (27, 0, "complete")])
def test_a_cell_says_how_much_of_it_is_scored(n, unscored, status):
    """Statuses count instances: one judged instance without a score, and the cell is not complete."""
    assert _manifest(n, unscored).status == status
    share = _manifest(n, unscored).scored_share
    assert share == pytest.approx(n / (n + unscored))


def test_failed_and_nothing_to_judge_keep_their_own_words():
    failed = _manifest(0, 3, failed=1)
    assert failed.status == "incomplete"  # a re-run may score them: not "unscored"
    assert ScoreManifest.of({"outputs": {"ok": 3}, "judgments": {}}).status == "no items"
    # no table (a summary written before): the verdicts decide
    assert ScoreManifest.of({"outputs": {"ok": 3}, "judgments": {"unscored": 3}}).status == "unscored"


def test_the_entries_with_no_score_are_named():
    def of(bench, score, word, flagged=False):
        c = cell(bench, f"a-{word}", "j", score, flagged=flagged)
        return c.model_copy(update={"status": Status(word=word, instances=3, scored=0, scored_share=0.0)})

    cells = [of("prefeval:gen", None, "unscored"), of("prefeval:gen", None, "no items"),
             of("prefeval:cls", 100.0, "complete"), of("prefeval:cls", None, "no items"),
             of("iba", 40.0, "complete", flagged=True)]  # a mean, only not an interpretable one: not "no score"
    assert without_score(cells) == {"prefeval:gen": ["no items", "unscored"]}


# --- probes ------------------------------------------------------------------------------------------------------

def test_judge_probes_on_a_benchmark_with_nothing_to_probe_says_so_once_per_entry(tmp_path):
    """APeB's rubric judge grades trajectories: no answer of known verdict, so it is never probed; PrefEval's
    generation checks are (their probe answers come from the release), so only the APeB entries are named."""
    rubric = {"name": "apeb", "sample": 2, "agents": ["apeb-oracle"], "judges": ["smollm2-apeb-rubric"]}
    entries = [PREF, rubric, {**rubric, "label": "again", "seed": 9}]
    assert unprobed(make_plan(load_experiment(_experiment(tmp_path, entries)))) == []  # probes off: silent
    lines = unprobed(make_plan(load_experiment(_experiment(tmp_path / "b", entries, judge_probes=4))))
    assert len(lines) == 2 and all("apeb.rubric" in line and "no AUC" in line for line in lines)
    assert lines[0].startswith("judge_probes: apeb is not probed") and "apeb:again" in lines[1]
    assert "apeb writes no probe answers" in lines[0]


# --- headline.md -----------------------------------------------------------------------------------------------

def test_a_tables_markdown_keeps_the_level_and_p_its_csv_has(tmp_path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("md", artifact_location=str(tmp_path / "store")))
    rows = pd.DataFrame([{"benchmark": "iba", "score": 55.25, "level": 0.95, "delta_p": 0.031},
                         {"benchmark": "apeb", "score": 12.0, "level": 0.95, "delta_p": None}])
    with mlflow.start_run() as run:
        log_table(rows, "headline", None)
    folder = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, dst_path=str(tmp_path / "art")))
    csv = pd.read_csv(folder / "headline.csv")
    md = (folder / "headline.md").read_text()
    assert list(csv["level"]) == [0.95, 0.95]
    md_rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines()[2:]]
    header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
    assert [float(r[header.index("level")]) for r in md_rows] == list(csv["level"])
    assert float(md_rows[0][header.index("delta_p")]) == 0.031 and md_rows[0][header.index("score")] == "55.2"


def test_the_headline_says_which_share_of_a_partly_scored_cell_is_scored():
    from perseval.report.views.text import status_short, status_text

    def of(word, share, unscored, item_share):
        return cell("iba", "a", "j", 50.0).model_copy(update={"status": Status(
            word=word, instances=10, scored=round(share / 10), scored_share=share, unscored_items=unscored,
            unscored_item_share=item_share)})

    partly = of("partly scored", 10.0, 27, 90.0)
    assert status_text(partly).startswith("partly scored (10% of instances scored), 27 unscored items (90%)")
    assert status_short(partly) == "partly 10% 27 unsc 90%"
    assert status_text(of("unscored", 0.0, 27, 100.0)).startswith("unscored")
