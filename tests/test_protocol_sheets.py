"""The protocol sheets (docs/protocols/) hold the paper configs to their papers: every row's paper-config and
CPU-config values are the effective ones `perseval show` computes, and a departure from the paper is marked."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from perseval.experiment.load import load_experiment
from tests.protocol_sheets import Row, check_row, check_sheet, read_sheet
from perseval.report.show import MISSING, effective_settings
from tests.conftest import CONFIGS, REPO, copy_configs
from tests.bespoke_official import official  # noqa: F401 (fixture)

SHEETS = REPO / "docs" / "protocols"


def _settings(config: str) -> dict:
    return effective_settings(load_experiment(REPO / config))


@pytest.mark.parametrize("name", ["iba", "apeb"])
def test_the_paper_and_cpu_configs_run_what_their_sheet_says(name):
    sheet = read_sheet(SHEETS / f"{name}.md")
    assert len(sheet.rows) >= 15
    assert check_sheet(sheet, _settings(sheet.paper_config), _settings(sheet.cpu_config)) == []


def test_the_bespoke_configs_run_what_their_sheet_says(official, monkeypatch):
    sheet = read_sheet(SHEETS / "bespoke.md")
    paper_config, cpu_config = (REPO / sheet.paper_config).resolve(), (REPO / sheet.cpu_config).resolve()
    monkeypatch.chdir(official.parent)  # the paper config reads the release from data/bespoke
    shutil.copytree(official, official.parent / "data" / "bespoke")
    paper = effective_settings(load_experiment(paper_config))
    cpu = effective_settings(load_experiment(cpu_config))
    assert check_sheet(sheet, paper, cpu) == []


def test_an_override_chain_that_replaces_a_paper_value_is_caught(tmp_path):
    """The bug class the sheets exist for: a paper config whose override quietly restores a CPU budget."""
    root = tmp_path / "configs"
    copy_configs(root)
    exp = root / "experiments" / "iba_paper.yaml"
    data = yaml.safe_load(exp.read_text())
    agents = data["overrides"].setdefault("agents", {})
    agents["iba-agent-wo-btda"] = {**agents.get("iba-agent-wo-btda", {}), "max_tokens": 192}
    exp.write_text(yaml.safe_dump(data))
    sheet = read_sheet(SHEETS / "iba.md")
    problems = check_sheet(sheet, effective_settings(load_experiment(exp)), _settings(sheet.cpu_config))
    assert len(problems) == 1 and "iba-agent-wo-btda/params/max_tokens" in problems[0] and "192" in problems[0]


def _row(**kw) -> Row:
    base = dict(line=9, path="a/b", paper=3, section="C.3", paper_config=3, cpu_config=1, cpu_path=None,
                status="same", why="")
    return Row(**{**base, **kw})


@pytest.mark.parametrize("row, needle", [
    (_row(paper_config=4), "a departure not marked deliberate"),
    (_row(status="deliberate", paper_config=4), "needs its reason"),
    (_row(status="unstated"), "status unstated"),
    (_row(path=None, status="same"), "must be marked missing or deliberate"),
    (_row(paper=4, paper_config=4, status="same"), "effective value is 3"),
    (_row(cpu_config=2), "CPU config's effective value at a/b is 1"),
    (_row(cpu_config=MISSING, cpu_path="x/y"), "at x/y is 5, the sheet says —"),
])
def test_each_kind_of_disagreement_is_reported(row, needle):
    problems = check_row(row, {"a": {"b": 3}}, {"a": {"b": 1}, "x": {"y": 5}})
    assert any(needle in p for p in problems), problems


def test_a_sheet_without_its_table_or_with_a_bad_status_is_refused(tmp_path):
    from perseval.core.errors import ConfigError
    bad = tmp_path / "x.md"
    bad.write_text("Paper config: `a.yaml` · CPU config: `b.yaml`\n\nno table\n")
    with pytest.raises(ConfigError, match="no table"):
        read_sheet(bad)
    text = (SHEETS / "apeb.md").read_text().replace("| same |", "| close enough |", 1)
    bad.write_text(text)
    with pytest.raises(ConfigError, match=r"line \d+: status 'close enough'"):
        read_sheet(bad)


def test_every_sheet_names_configs_that_exist():
    for path in sorted(SHEETS.glob("*.md")):
        sheet = read_sheet(path)
        assert Path(REPO / sheet.paper_config).is_file() and Path(REPO / sheet.cpu_config).is_file(), path


@pytest.mark.parametrize("name", ["persona_mem", "prefeval", "lamp", "lamp_qa", "longlamp"])
def test_the_persona_mem_and_prefeval_configs_run_what_their_sheet_says(name, tmp_path, monkeypatch):
    """Their paper configs read the release from data/<name>, the CPU configs the samples under tests/data (LaMP's,
    LaMP-QA's and LongLaMP's ship in their folders)."""
    sheet = read_sheet(SHEETS / f"{name}.md")
    assert len(sheet.rows) >= 15
    paper_config, cpu_config = (REPO / sheet.paper_config).resolve(), (REPO / sheet.cpu_config).resolve()
    monkeypatch.chdir(tmp_path)
    sample = REPO / "perseval" / "benchmarks" / name / "sample"
    sample = sample if sample.is_dir() else REPO / "tests" / "data" / name
    for target in (tmp_path / "data" / name, tmp_path / "tests" / "data" / name):
        shutil.copytree(sample, target)
    paper = effective_settings(load_experiment(paper_config))
    cpu = effective_settings(load_experiment(cpu_config))
    assert check_sheet(sheet, paper, cpu) == []


def test_the_prefeval_word_limit_is_on_the_sheet_and_in_what_the_paper_config_sends(tmp_path, monkeypatch):
    """The official generation scripts end the question with "(Please respond within {max_tokens} words.)": the
    sheet lists it, and the paper config's zero-shot and RAG agents send it (N = their max_tokens) on a
    generation question, never on a classification one."""
    import asyncio

    from perseval.agents.base import AgentContext
    from perseval.benchmarks.base import build_all
    from perseval.benchmarks.prefeval.benchmark import PrefEval
    from perseval.core.instances import Passage
    from perseval.experiment.components import make_agent
    from perseval.experiment.load import bound
    from tests.scripted import ScriptedChat

    sheet = (SHEETS / "prefeval.md").read_text()
    assert "(Please respond within {max_tokens} words.)" in sheet and "params/word_limit` | `true`" in sheet
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "tests" / "data" / "prefeval", tmp_path / "data" / "prefeval")
    agents = bound(load_experiment(REPO / read_sheet(SHEETS / "prefeval.md").paper_config)).agents
    data = build_all(PrefEval(PrefEval.Params(inter_turns=[2])), sample=100, seed=3,
                     source=REPO / "tests" / "data" / "prefeval")
    gen = next(i for i in data.instances if i.payload["task"] == "generation")
    mcq = next(i for i in data.instances if i.payload["task"] == "classification")

    async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
        return []

    for name in ("prefeval-zero-shot", "prefeval-rag"):
        spec = agents[name]
        assert spec.params.max_tokens == 300
        agent = make_agent(spec)
        for inst, want in ((gen, True), (mcq, False)):
            chat = ScriptedChat('{"choice": "A"}')
            ctx = AgentContext(llm=chat, retrieve=retrieve,
                               documents=lambda owner: [d for d in data.documents if d.owner == owner])
            asyncio.run(agent.act(inst, ctx, 0, name))
            last = chat.calls[0]["messages"][-1]["content"]
            assert ("(Please respond within 300 words.)" in last) is want, (name, last)
            assert not want or last.endswith(f"{inst.query} (Please respond within 300 words.)")
