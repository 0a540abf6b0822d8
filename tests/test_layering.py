"""The layers, checked on every module (imports inside functions included): perseval/ never imports
Prefect, tasks/ or flows/; tasks/ never imports flows/."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES = {"perseval": ("prefect", "prefect_dask", "tasks", "flows"), "tasks": ("flows",)}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(RULES))
def test_no_layer_imports_a_layer_above_it(layer):
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    bad = {str(f.relative_to(ROOT)): sorted(n for n in imported(f) if n.split(".")[0] in RULES[layer])
           for f in files}
    assert {f: n for f, n in bad.items() if n} == {}


def test_the_checker_sees_imports_inside_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from prefect import task\n    import flows.cli\n")
    assert imported(f) == {"prefect", "flows.cli"}
