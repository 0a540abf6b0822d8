"""An experiment from the command line: `perseval run lamp --model m --limit 3` is the benchmark's own CPU
experiment (configs/experiments/<benchmark>_cpu.yaml in its folder) with the options replacing its fields.

The result is an experiment YAML, written to a file and loaded like any other (perseval.experiment.load), so a
command-line run is validated like a file, has the cache keys of the equivalent file, and is re-run from it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from perseval.core.errors import ConfigError
from perseval.core.suggest import suggestion
from perseval.kernel.registry import manifest_index
from perseval.experiment.config import read_yaml
from perseval.experiment.load import experiment_file
from perseval.experiment.listing import config_files

# Fields two CPU experiments must agree on to run as one: they enter keys or bind every entry.
_SHARED = ("repeats", "overrides", "deployments", "plugins", "judge_probes", "judges")


def benchmark_names() -> list[str]:
    return sorted(name for (registry, name) in manifest_index() if registry == "BENCHMARKS")


def is_benchmark_list(value: str) -> bool:
    """`lamp` or `lamp,iba`: every part a registered benchmark (an experiment name or a file is not)."""
    known = set(benchmark_names())
    return all(part in known for part in value.split(","))


def _cpu_experiment(name: str) -> dict[str, Any]:
    if name not in benchmark_names():
        raise ConfigError(f"no benchmark named {name!r} ({suggestion(name, benchmark_names())})")
    return read_yaml(experiment_file(f"{name}_cpu"))


def _merge(parts: list[dict[str, Any]], judges_given: bool = False) -> dict[str, Any]:
    """Several CPU experiments as one: each entry keeps its file's controls and seed (so its keys are those of
    its own file); backbones and retrievers are the union; files that differ in what binds every entry (judges,
    overrides, repeats, ...) are refused rather than run with keys of neither."""
    if len(parts) == 1:
        return parts[0]
    first = dict(parts[0])
    for field in (f for f in _SHARED if not (judges_given and f == "judges")):
        values = {yaml.safe_dump(p.get(field)) for p in parts}
        if len(values) > 1:
            raise ConfigError(f"the benchmarks' CPU experiments differ in {field!r}: run them apart, or write one "
                              "experiment file (--print-config gives each one's)")
    entries = []
    for p in parts:
        for entry in p["benchmarks"]:
            entry = dict(entry)
            entry.setdefault("controls", p.get("controls", []))
            entry.setdefault("seed", p.get("seed", 42))
            entries.append(entry)
    first.update(name="+".join(p["name"] for p in parts),
                 controls=[], benchmarks=entries,
                 backbones=list(dict.fromkeys(b for p in parts for b in p["backbones"])),
                 retrievers=list(dict.fromkeys(r for p in parts for r in p["retrievers"])))
    return first


def _checked(option: str, kind: str, names: list[str]) -> list[str]:
    known = [p.stem for p in config_files(kind, Path("configs"))]
    for name in names:
        if name not in known:
            raise ConfigError(f"{option}: no {kind[:-1]} named {name!r} ({suggestion(name, known)})")
    return names


def cli_experiment(benchmarks: list[str], models: list[str] | None = None, judges: list[str] | None = None,
                   agents: list[str] | None = None, retrievers: list[str] | None = None, limit: int | None = None,
                   controls: list[str] | None = None, output_root: str | None = None) -> dict[str, Any]:
    """The experiment (as the YAML's mapping) that `perseval run <benchmarks> <options>` runs."""
    exp = _merge([_cpu_experiment(b) for b in benchmarks], judges is not None)
    if models is not None:
        exp["backbones"] = _checked("--model", "models", models)
    if retrievers is not None:
        exp["retrievers"] = _checked("--retriever", "retrievers", retrievers)
    if judges is not None:
        exp["judges"] = _checked("--judge", "judges", judges)
    if controls is not None:
        allowed = ["swapped-history"]
        for c in controls:
            if c not in allowed:
                raise ConfigError(f"--controls: no control named {c!r} ({suggestion(c, allowed)})")
        exp["controls"] = controls
    if output_root is not None:
        exp["output_root"] = output_root
    for entry in exp["benchmarks"]:
        if judges is not None:
            entry.pop("judges", None)
        if controls is not None:
            entry.pop("controls", None)
        if agents is not None:
            entry["agents"] = _checked("--agents", "agents", agents)
            if entry.get("baseline") not in agents:
                entry.pop("baseline", None)
        if limit is not None:
            entry["sample"] = limit
    return exp


def experiment_yaml(exp: dict[str, Any]) -> str:
    return ("# written by `perseval run` from the command line; `perseval run <this file>` runs it again\n"
            + yaml.safe_dump(exp, sort_keys=False, allow_unicode=True))


def write_experiment(exp: dict[str, Any], root: str | Path) -> Path:
    """The experiment's YAML under <root>/cli/, named by its content: what `perseval run` loads and keeps."""
    text = experiment_yaml(exp)
    path = Path(root) / "cli" / f"{exp['name']}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
