"""No circles among the library's imports.

Two checks: the import graph of perseval/ read with `ast` (every import: function-level ones, and those
under `if TYPE_CHECKING:` too, since a circle only for the type checker is still two modules that need
each other) has no cycle; and every module imports on its own in a fresh interpreter, so no module works
only because another one was imported first.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "perseval"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def imports_of(name: str, path: Path) -> set[str]:
    """The perseval modules `name` imports: `from a.b import c` is module a.b.c when that is a module."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        found |= {t for t in targets if t in MODULES and t != name}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_and_function_level_imports_are_read(tmp_path):
    code = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from perseval.pipeline.plan import Plan\n"
            "def f():\n    from perseval.pipeline import stages\n    from ..core.instances import Instance\n")
    path = tmp_path / "mod.py"
    path.write_text(code)
    assert imports_of("perseval.pipeline.mod", path) == {"perseval.pipeline.plan", "perseval.pipeline.stages",
                                                          "perseval.core.instances"}


def test_the_library_import_graph_has_no_cycle():
    graph = {name: imports_of(name, path) for name, path in MODULES.items()}
    assert sum(len(v) for v in graph.values()) > 200  # the graph was really read
    assert cycles(graph) == []


# Each module is imported in a child forked from an interpreter that has loaded only third-party
# libraries (a fresh interpreter per module, without paying each one's start-up); as many children at once as
# there are cores. The heavy libraries the modules import (MLflow, Prefect, torch...) are loaded once, in the
# parent: what is checked is that no perseval module needs another perseval module imported first.
FORK_IMPORTS = r'''
import importlib, os, sys, traceback
for lib in ("pydantic", "yaml", "numpy", "pandas", "pyarrow", "pyarrow.parquet", "httpx", "tenacity", "scipy.stats",
            "statsmodels.api", "sklearn.metrics", "openai", "mlflow", "mlflow.tracking", "prefect", "dask",
            "distributed", "torch", "faiss", "FlagEmbedding", "matplotlib.pyplot", "typer", "rich"):
    importlib.import_module(lib)
failed, running = [], {}


def reap():
    pid, status = os.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        failed.append(running[pid])
    del running[pid]


for name in sys.argv[1:]:
    while len(running) >= (os.cpu_count() or 1):
        reap()
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    running[pid] = name
while running:
    reap()
print("FAILED", sorted(failed))
sys.exit(1 if failed else 0)
'''


def test_every_module_imports_alone_in_a_fresh_interpreter():
    proc = subprocess.run([sys.executable, "-c", FORK_IMPORTS, *sorted(MODULES)], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "FAILED []" in proc.stdout
