"""A new benchmark is one folder (issue 41): code, configs, commands and human labels of a throwaway benchmark
live in a temporary folder, installed as a package with a `perseval.plugins` entry point, and `perseval
validate`, `perseval run`, `perseval judge-check` and the benchmark's own command work with no file of this
repository edited."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

BENCHMARK = '''
"""colours: each user once said which colour they like, among unrelated turns; the task asks for it."""
from __future__ import annotations

import random
from pathlib import Path

import typer
from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.base import Benchmark, BenchmarkData
from perseval.core.instances import AgentOutput, Document, Instance, InstanceScore, Judgment
from perseval.judges.base import Judge, JudgeBinding
from perseval.kernel.commands import register_commands
from perseval.kernel.params import Params
from perseval.kernel.registry import register_agent, register_benchmark, register_judge

COLOURS = ["red", "green", "blue", "yellow"]
NOISE = ["the train was late", "I bought bread", "meeting moved to noon", "rain again today"]


class ColoursParams(Params):
    noise: int = Field(2, ge=0)


@register_benchmark("colours")
class Colours(Benchmark[ColoursParams]):
    headline_metric = "accuracy"
    rule_judges = ("colours.exact",)
    carries_human_labels = True

    @classmethod
    def human_scores(cls, instance: Instance) -> dict[str, float]:
        return {"accuracy": instance.gold["human"]}

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        rng = random.Random(seed)
        instances, documents = [], []
        for i in range(sample):
            user, colour = f"u{i}", rng.choice(COLOURS)
            turns = [*rng.sample(NOISE, self.params.noise), f"my favourite colour is {colour}"]
            documents += [Document(user, f"{user}-t{j}", t, f"2025-01-0{j + 1}") for j, t in enumerate(turns)]
            # a rater's score of the lookup's answer, carried by the data (like Bespoke's meta-test ratings)
            human = 100.0 if i % 2 == 0 else 0.0
            instances.append(Instance(f"colours-{i}", "colours", user, "all", "which colour?", {},
                                      {"colour": colour, "human": human}))
        return BenchmarkData(instances, documents, {"users": sample})


@register_agent("colours.lookup")
class Lookup(Agent):
    """Reads the histories of even-numbered users only: right for them, empty for the others."""
    benchmarks = ("colours",)
    needs = frozenset({"documents"})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        if int(instance.user_id[1:]) % 2:
            return AgentOutput(instance.instance_id, name, repeat, "")
        words = " ".join(d.text for d in ctx.documents(instance.user_id)).split()
        return AgentOutput(instance.instance_id, name, repeat, next((w for w in words if w in COLOURS), ""))


@register_judge("colours.exact")
class Exact(Judge):
    benchmark = "colours"
    item = "answer"
    metrics = ("accuracy",)
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        hit = float(output.text.strip() == instance.gold["colour"])
        return [self.judgment(instance, output, binding, "colour", hit, raw=output.text)]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        return [self.instance_score(instance, output, judgments, "accuracy", 100.0 * judgments[0].score, 1, 0)]


def commands(host) -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, help="the colours benchmark's own commands")

    @app.command()
    def palette() -> None:
        """The colours a user may like."""
        host.console.print("palette: " + ", ".join(COLOURS))

    return app


register_commands("colours", commands)
'''


def _install(site: Path) -> Path:
    """The benchmark folder as an installed package: its code, its configs, a dist-info naming the entry point."""
    pkg = site / "colours_bench"
    (pkg / "configs" / "agents").mkdir(parents=True)
    (pkg / "configs" / "experiments").mkdir()
    (pkg / "__init__.py").write_text("from colours_bench import benchmark  # noqa: F401 (registers)\n")
    (pkg / "benchmark.py").write_text(textwrap.dedent(BENCHMARK))
    (pkg / "configs" / "agents" / "colours-lookup.yaml").write_text(
        yaml.safe_dump({"name": "colours-lookup", "kind": "colours.lookup"}))
    exp = pkg / "configs" / "experiments" / "colours.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "colours", "seed": 3, "backbones": [], "retrievers": [],
        "benchmarks": [{"name": "colours", "sample": 6, "agents": ["colours-lookup"]}],
        "dask": {"n_workers": 1, "threads_per_worker": 2, "in_process": True},
        "mlflow": {"experiment": "colours", "tracking_uri": f"sqlite:///{site.parent}/mlruns/mlflow.db",
                   "artifact_root": str(site.parent / "mlruns" / "artifacts")},
        "output_root": str(site.parent / "runs")}))
    dist = site / "colours_bench-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: colours-bench\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[perseval.plugins]\ncolours = colours_bench\n")
    return exp


def _perseval(args: list[str], site: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perseval_flows.cli", *args], cwd=site.parent, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO}", **env), timeout=900)


def _repo_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True,
                          text=True).stdout


def test_a_benchmark_in_its_own_folder_validates_and_brings_its_command(tmp_path):
    before = _repo_state()
    exp = _install(tmp_path / "site")
    ok = _perseval(["validate", str(exp)], tmp_path / "site")
    assert ok.returncode == 0 and "1 cell(s)" in ok.stdout, ok.stdout + ok.stderr
    palette = _perseval(["colours", "palette"], tmp_path / "site")
    assert palette.returncode == 0 and "palette: red, green, blue, yellow" in palette.stdout, palette.stderr
    assert _repo_state() == before  # nothing of the repository was edited or added


@pytest.mark.integration
def test_a_benchmark_in_its_own_folder_runs_end_to_end(tmp_path, prefect_api):
    exp = _install(tmp_path / "site")
    summary = tmp_path / "summary.json"
    proc = _perseval(["run", str(exp), "--quiet", "--summary-json", str(summary)], tmp_path / "site",
                     PREFECT_API_URL=prefect_api)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = json.loads(summary.read_text())["headline"]
    assert (row["benchmark"], row["agent"], row["judge"], row["score"], row["n"]) == \
        ("colours", "colours-lookup", "colours.exact", 50.0, 6)
    check = _perseval(["judge-check", str(exp), "--no-log", "--out", str(tmp_path / "validity.csv")],
                      tmp_path / "site", PREFECT_API_URL=prefect_api)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    import pandas as pd

    (validity,) = pd.read_csv(tmp_path / "validity.csv").to_dict("records")  # the labels the data carries
    assert validity["criterion"] == "accuracy" and validity["n"] == 6 and validity["pearson"] == pytest.approx(1.0)
