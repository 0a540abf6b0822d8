"""The valid inputs that tests/test_bad_input.py and tests/test_bad_input_more.py break: a benchmark source per
loader, and an experiment with one benchmark entry."""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from perseval.benchmarks.apeb.logfiles import write_logs
from perseval.benchmarks.apeb.synth_logs import generate_logs
from perseval.benchmarks.bespoke.sample import write_sample

from .conftest import REPO, minimal

AGENTS = {"iba": ["iba-no-history"], "bespoke": ["bespoke-no-context"], "apeb": ["apeb-direct"],
          "custom": ["no-history"], "prefeval": ["prefeval-no-history"], "persona_mem": ["persona-mem-no-history"],
          "lamp": ["lamp-no-profile"]}
PARAMS = {"prefeval": {"inter_turns": [2]}}  # the sample holds 4 inter-turns, fewer than the default 10
RULE_JUDGED = ("apeb", "persona_mem", "lamp")  # scored by rule: no LLM judge in the experiment


# --- valid inputs -------------------------------------------------------------------------------------------

def _valid_source(loader: str, folder: Path) -> Path:
    folder.mkdir(parents=True)
    if loader == "iba":
        minimal(folder)
    elif loader == "custom":
        for f in (REPO / "tests" / "data" / "custom_example").iterdir():
            shutil.copy(f, folder / f.name)
    elif loader == "bespoke":
        write_sample(folder, users=2, seed=0)
    elif loader == "apeb":
        write_logs(generate_logs(3, 0), folder, fmt="csv")
    elif loader in ("prefeval", "persona_mem"):  # the official layouts' hand-written samples
        shutil.copytree(REPO / "tests" / "data" / loader, folder, dirs_exist_ok=True)
    elif loader == "lamp":  # the hand-written sample in the official layout, which the benchmark ships
        shutil.copytree(REPO / "perseval" / "benchmarks" / "lamp" / "sample", folder, dirs_exist_ok=True)
    return folder


def _experiment(configs: Path, out: Path, benchmark: str | None = None, source: Path | None = None) -> Path:
    """An experiment with one benchmark entry (quickstart's IBA one when `benchmark` is None)."""
    entry = {"name": benchmark or "iba", "sample": 2, "agents": AGENTS[benchmark or "iba"]}
    if source is not None:
        entry["source"] = str(source)
    if benchmark in PARAMS:
        entry["params"] = PARAMS[benchmark]
    judges = [] if benchmark in RULE_JUDGED else ["smollm2-judge"]
    exp = {"name": "bad-input", "output_root": str(out), "backbones": ["smollm2-135m"], "retrievers": ["minilm"],
           "judges": judges, "benchmarks": [entry]}
    path = configs / "experiments" / "bad.yaml"
    path.write_text(yaml.safe_dump(exp, sort_keys=False))
    return path
