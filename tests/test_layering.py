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


def imported_test_modules(name: str, root: Path = ROOT) -> set[str]:
    """The test modules (tests/**/test_*.py, relative to `root`) that an imported `name` is or lies inside."""
    parts = name.split(".")
    found = set()
    for i in range(1, len(parts) + 1):
        path = root.joinpath(*parts[:i]).with_suffix(".py")
        if path.name.startswith("test_") and path.is_file() and path.relative_to(root).parts[0] == "tests":
            found.add(str(path.relative_to(root)))
    return found


def test_no_test_module_imports_another():
    """Shared helpers and fixtures live in conftest.py or a plain helper module under tests/ (issue 30): a test
    module imported by another would also run its tests' fixtures there, and ties the two files' tests together."""
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    assert files
    bad = {str(f.relative_to(ROOT)): sorted(set().union(*(imported_test_modules(n) for n in imported(f)))
                                            - {str(f.relative_to(ROOT))}) for f in files}
    assert {f: n for f, n in bad.items() if n} == {}


def test_the_test_module_check_sees_relative_absolute_and_package_imports(tmp_path):
    (tmp_path / "tests").mkdir()
    for name in ("test_a.py", "test_b.py", "test_c.py", "test_d.py", "helpers.py", "conftest.py"):
        (tmp_path / "tests" / name).write_text("")
    f = tmp_path / "tests" / "test_a.py"
    f.write_text("from .test_b import x\nfrom tests import test_c\ndef g():\n    import tests.test_d\n"
                 "from .conftest import y\nfrom tests.helpers import z\n")
    found = set().union(*(imported_test_modules(n, tmp_path) for n in imported(f, tmp_path)))
    assert found == {"tests/test_b.py", "tests/test_c.py", "tests/test_d.py"}
