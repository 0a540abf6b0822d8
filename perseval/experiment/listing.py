"""What exists, by kind, read from the manifests and the config folders (`perseval list`).

Nothing is imported to list it: registered components come from the components.yaml manifests
(perseval.kernel.registry.manifest_index), configs from their YAML files, a description from the
file's first comment line or the registering module's docstring (read as text).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from perseval.core.errors import ConfigError
from perseval.core.suggest import suggestion
from perseval.core.yaml_text import read_yaml_file
from perseval.kernel.registry import manifest_index
from perseval.experiment.load import SHIPPED_CONFIGS, benchmark_config_roots

KINDS = ("benchmarks", "agents", "judges", "models", "deployments", "experiments", "retrievers")
_REGISTRY = {"benchmarks": "BENCHMARKS", "agents": "AGENTS", "judges": "JUDGES", "retrievers": "RETRIEVERS"}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Entry:
    name: str
    what: str  # one line: what it is
    where: str  # the YAML (or module) it lives in


def _first_comment(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""


def _docstring_line(module: str) -> str:
    path = _PACKAGE_ROOT.joinpath(*module.split(".")).with_suffix(".py")
    if not path.is_file():
        return ""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(_PACKAGE_ROOT))
    except ValueError:
        return str(path)


def config_files(kind: str, own: Path | None = None) -> list[Path]:
    """configs/<kind>/*.yaml of the user's folder, perseval's shipped configs and every benchmark folder, first
    of each name wins (the lookup order of perseval.experiment.load.config_roots)."""
    roots = ([own] if own is not None else []) + [SHIPPED_CONFIGS, *benchmark_config_roots()]
    seen: dict[str, Path] = {}
    for root in roots:
        for path in sorted((root / kind).glob("*.yaml")):
            seen.setdefault(path.stem, path)
    return [seen[k] for k in sorted(seen)]


def experiment_names(own: Path | None = Path("configs")) -> list[str]:
    return [p.stem for p in config_files("experiments", own)]


def _kind_of(path: Path) -> str:
    data = read_yaml_file(path) or {}
    return str(data.get("kind") or "") if isinstance(data, dict) else ""


def _registered(kind: str) -> list[Entry]:
    label = _REGISTRY[kind]
    return [Entry(name, _docstring_line(module), module.replace(".", "/") + ".py")
            for (registry, name), module in sorted(manifest_index().items()) if registry == label]


def listing(kind: str, own: Path | None = Path("configs")) -> list[Entry]:
    """One entry per name of `kind`: a config YAML (an agent or judge config says which registered kind it
    builds), then, for agents, judges and retrievers, each registered kind (its module)."""
    if kind not in KINDS:
        raise ConfigError(f"no kind of thing named {kind!r} to list ({suggestion(kind, KINDS)}; allowed: "
                          f"{', '.join(KINDS)})")
    if kind == "benchmarks":
        return [Entry(e.name, e.what, _benchmark_where(e.name, e.where)) for e in _registered("benchmarks")]
    entries = []
    for path in config_files(kind, own):
        built = _kind_of(path) if kind in ("agents", "judges", "retrievers", "deployments") else ""
        what = _first_comment(path)
        entries.append(Entry(path.stem, (f"[{built}] " if built else "") + what, _relative(path)))
    if kind in _REGISTRY:
        entries += [Entry(e.name, "registered kind: " + e.what, e.where) for e in _registered(kind)]
    return entries


def _benchmark_where(name: str, module_path: str) -> str:
    folder = _PACKAGE_ROOT / Path(module_path).parent / "configs" / "experiments"
    cpu = folder / f"{name}_cpu.yaml"
    return _relative(cpu) if cpu.is_file() else _relative(folder) if folder.is_dir() else module_path
