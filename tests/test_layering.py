"""The layers and the wings, checked on every module (imports inside functions included).

Layers: perseval/ never imports Prefect, tasks/ or flows/ (installed as perseval_tasks and perseval_flows);
tasks/ never imports flows/.
Wings of perseval/ stack in LAYERS, and a wing imports only wings of the layers below its own:
core/ (records, store, errors) < kernel/ (Params, registries, capabilities: the shared vocabulary) <
the base components (llm, metrics, retrieval) < agents and judges < benchmarks < experiment/ (loading and
checking an experiment) < pipeline/ < report/. A benchmark's own command modules (named in its components.yaml), which
nothing in perseval imports, keep their wing's rules too: they read the store through core/ and the rest
through perseval.kernel.commands.CommandHost. So no component imports experiment/, the agent contract never
reaches into a benchmark, nothing runs back up, and no module is an exception. No benchmark imports
another benchmark (test_no_benchmark_imports_another).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> the top-level packages it may not import (flows/ and tasks/ are installed under perseval's names; the
# bare names are refused too, so no module reaches them through the checkout's folder)
RULES = {"perseval": ("prefect", "prefect_dask", "tasks", "flows", "perseval_tasks", "perseval_flows"),
         "tasks": ("flows", "perseval_flows")}
LAYERS = (("core",), ("kernel",), ("llm", "metrics", "retrieval"), ("agents", "judges"), ("benchmarks",),
          ("experiment",), ("pipeline",), ("report",))
WINGS = tuple(w for layer in LAYERS for w in layer)
LAYER_OF = {w: i for i, layer in enumerate(LAYERS) for w in layer}
# wing -> the perseval wings it may not import: its own layer's other wings and every layer above
WING_RULES = {w: tuple(v for v in WINGS if v != w and LAYER_OF[v] >= LAYER_OF[w]) for w in WINGS}


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


def command_files() -> set[Path]:
    """A benchmark's own command modules (components.yaml `commands:`), mounted by the `perseval` command."""
    from perseval.kernel.registry import command_modules

    return {ROOT.joinpath(*m.split(".")).with_suffix(".py") for m in command_modules().values()}


@pytest.mark.parametrize("wing", sorted(WING_RULES))
def test_no_wing_imports_a_wing_it_may_not(wing):
    files = sorted((ROOT / "perseval" / wing).rglob("*.py"))  # no exception: a command module included
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
    f.write_text("def g():\n    from prefect import task\n    import perseval_flows.cli\n    from ..pipeline import plan\n")
    found = imported(f, tmp_path)
    assert {"prefect", "perseval_flows.cli", "perseval.pipeline", "perseval.pipeline.plan"} <= found
    assert wing_of("perseval.pipeline.plan") in WING_RULES["metrics"]


def test_the_rules_forbid_the_arrows_the_layers_exist_for():
    """Spelled out, so a reordering of LAYERS that allowed one of them fails here."""
    components = ("agents", "judges", "retrieval", "llm", "metrics", "benchmarks")
    assert all("experiment" in WING_RULES[c] for c in components)  # components never import the config phase
    assert "benchmarks" in WING_RULES["agents"]  # the agent contract depends on no benchmark
    assert set(WINGS) - set(WING_RULES["kernel"]) == {"core", "kernel"}  # the kernel imports no component
    assert all("report" in WING_RULES[w] for w in WINGS if w != "report")  # nothing runs back up from views


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


def test_a_benchmark_s_commands_are_imported_by_nothing_in_perseval():
    commands = {".".join(f.relative_to(ROOT).with_suffix("").parts) for f in command_files()}
    assert "perseval.benchmarks.iba.cli" in commands
    users = {str(f.relative_to(ROOT)) for f in (ROOT / "perseval").rglob("*.py") if imported(f) & commands}
    assert users == set()


def cross_benchmark_imports(root: Path = ROOT) -> dict[str, list[str]]:
    """module file -> the modules of other benchmark folders it imports (perseval/benchmarks/<a>/ -> <b>)."""
    benchmarks = root / "perseval" / "benchmarks"
    folders = {p.name for p in benchmarks.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    found = {}
    for f in sorted(benchmarks.glob("*/**/*.py")):
        own = f.relative_to(benchmarks).parts[0]
        other = sorted(n for n in imported(f, root) if n.split(".")[:2] == ["perseval", "benchmarks"]
                       and len(n.split(".")) > 2 and n.split(".")[2] in folders - {own})
        if other:
            found[str(f.relative_to(root))] = other
    return found


def test_no_benchmark_imports_another():
    """What two benchmarks share lives below them, in perseval/benchmarks/ (custom's reading of a release folder,
    IBA-Bench's actions and judges, the ranking APeB asks for: release_folder, actions, rankings ...)."""
    assert cross_benchmark_imports() == {}


def test_the_cross_benchmark_check_sees_a_relative_import(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "perseval" / "benchmarks" / name).mkdir(parents=True)
        (tmp_path / "perseval" / "benchmarks" / name / "__init__.py").write_text("")
    (tmp_path / "perseval" / "benchmarks" / "a" / "m.py").write_text("def f():\n    from ..b import x\n")
    assert cross_benchmark_imports(tmp_path) == {"perseval/benchmarks/a/m.py": ["perseval.benchmarks.b",
                                                                                "perseval.benchmarks.b.x"]}


def test_flows_and_tasks_are_installed_under_perseval_s_names(tmp_path):
    """Outside the checkout, the generic names `flows` and `tasks` are not perseval's (another distribution may
    own them); perseval_flows and perseval_tasks are, and the `perseval` command starts from them."""
    import subprocess
    import sys

    def attempt(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"})

    for name in ("flows", "tasks"):
        assert "No module named" in attempt(f"import {name}").stderr
    done = attempt("import perseval_flows.cli, perseval_tasks.stages; print(perseval_flows.cli.__file__)")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent.name == "flows"  # the repository's folder, under perseval's name
    help_ = subprocess.run([str(Path(sys.executable).parent / "perseval"), "--help"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert help_.returncode == 0 and "Usage: perseval" in help_.stdout
