"""The layers and the wings, checked on every module (imports inside functions included).

Layers: perseval/ never imports Prefect, tasks/ or flows/; tasks/ never imports flows/.
Wings of perseval/: core/ imports nothing else of perseval; the components (agents, judges, retrieval, llm,
metrics, benchmarks) never import pipeline/ or report/; pipeline/ never imports report/.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES = {"perseval": ("prefect", "prefect_dask", "tasks", "flows"), "tasks": ("flows",)}
COMPONENTS = ("agents", "judges", "retrieval", "llm", "metrics", "benchmarks")
WINGS = ("core", "setup", "pipeline", "report", *COMPONENTS)
# wing -> the perseval wings it may not import
WING_RULES = {"core": tuple(w for w in WINGS if w != "core"), "pipeline": ("report",),
              **{c: ("pipeline", "report") for c in COMPONENTS}}


def imported(path: Path, root: Path = ROOT) -> set[str]:
    """Absolute module names `path` imports; a relative import is resolved against its package (under `root`)."""
    package = list(path.relative_to(root).with_suffix("").parts)[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names |= {module} | {f"{module}.{a.name}" for a in node.names}
    return names


def wing_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "perseval" and parts[1] in WINGS else None


@pytest.mark.parametrize("layer", sorted(RULES))
def test_no_layer_imports_a_layer_above_it(layer):
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    bad = {str(f.relative_to(ROOT)): sorted(n for n in imported(f) if n.split(".")[0] in RULES[layer])
           for f in files}
    assert {f: n for f, n in bad.items() if n} == {}


@pytest.mark.parametrize("wing", sorted(WING_RULES))
def test_no_wing_imports_a_wing_it_may_not(wing):
    files = sorted((ROOT / "perseval" / wing).rglob("*.py"))
    assert files
    bad = {str(f.relative_to(ROOT)): sorted(n for n in imported(f) if wing_of(n) in WING_RULES[wing])
           for f in files}
    assert {f: n for f, n in bad.items() if n} == {}


def test_the_root_holds_only_wings():
    """perseval/ itself holds no module but its __init__: every module lives in a wing."""
    assert sorted(p.name for p in (ROOT / "perseval").glob("*.py")) == ["__init__.py"]
    assert {p.name for p in (ROOT / "perseval").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(WINGS)


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path):
    f = tmp_path / "perseval" / "metrics" / "m.py"
    f.parent.mkdir(parents=True)
    f.write_text("def g():\n    from prefect import task\n    import flows.cli\n    from ..pipeline import plan\n")
    found = imported(f, tmp_path)
    assert {"prefect", "flows.cli", "perseval.pipeline", "perseval.pipeline.plan"} <= found
    assert wing_of("perseval.pipeline.plan") in WING_RULES["metrics"]
