"""No function or class without a caller outside tests, and no re-exports (AST scans of the repository's code).

Callers: every top-level function and class defined in perseval/ is used somewhere in perseval/, flows/, tasks/
or scripts/ outside its own definition. Used means named from another place (imported, called, subclassed, in an
annotation), resolved through the imports to the module that defines it; registered by a decorator (a
component's `@register_*`, a typer command, a Prefect task or flow); the `commands` of a module a components.yaml
lists under `commands:` (the CLI mounts it by that name); listed in its module's `__all__` (an API); or named
by a "module:attribute" string (a card's pointers, an entry point). A docstring that names a function does not
call it. ALLOWED names what stays without a caller, each with why.

Re-exports: every `from <module> import name` of perseval/, flows/, tasks/, scripts/ and tests/ takes the name
from the module that defines it (or a submodule), a module's `__all__` lists only names it defines, and no
module of perseval/ imports a name it does not use itself (the pass-through that `# noqa: F401` used to mark).
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CODE = ("perseval", "flows", "tasks", "scripts")  # where a caller counts (tests/ does not)
INSTALLED = {"flows": "perseval_flows", "tasks": "perseval_tasks"}  # folder -> the package name it installs as
REGISTERING = re.compile(r"^(register_\w+|command|callback|task|flow)$")  # decorators that register what they wrap
OURS = ("perseval", "perseval_flows", "perseval_tasks", "scripts", "tests")  # the packages parse() reads
POINTER = re.compile(r"^([A-Za-z_][\w.]*):([A-Za-z_][\w.]*)$")  # "module:attribute"

# (module, name) -> why it has no caller in the repository's code
ALLOWED: dict[tuple[str, str], str] = {
    ("perseval.kernel.commands", "register_commands"): "the API by which an installed plugin adds commands",
}
# files whose imports may take a name through a re-export (none)
REEXPORT_ALLOWED: tuple[str, ...] = ()


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts[0] = INSTALLED.get(parts[0], parts[0])
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool
    defined: dict[str, ast.AST] = field(default_factory=dict)  # top-level functions and classes
    bound: set[str] = field(default_factory=set)  # every top-level name it binds itself (not by an import)
    nodes: list[tuple[str | None, ast.AST]] = field(default_factory=list)  # (the definition it is in, node)
    docstrings: set[int] = field(default_factory=set)  # ids of its string statements (docstrings)


def parse(folders: tuple[str, ...] = (*CODE, "tests"), root: Path = ROOT) -> dict[str, Module]:
    modules = {}
    for f in sorted(f for folder in folders for f in (root / folder).rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        m = Module(module_name(f, root), f, tree, f.name == "__init__.py")
        m.defined = {n.name: n for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        m.bound = _bound(tree.body)
        m.nodes = [(getattr(top, "name", None), n) for top in tree.body for n in ast.walk(top)]
        m.docstrings = {id(n.value) for _, n in m.nodes
                        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        modules[m.name] = m
    return modules


def _bound(statements: list[ast.stmt]) -> set[str]:
    """The names module-level statements bind themselves (imports left out), in `if`/`try` blocks too."""
    names: set[str] = set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                      *[h.body for h in getattr(node, "handlers", [])]]
            names |= set().union(*(_bound(b) for b in blocks))
    return names


def absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module an import names, a relative one resolved against the importing module's package."""
    if not node.level:
        return node.module or ""
    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def uses(modules: dict[str, Module]) -> set[tuple[str, str]]:
    """Every (module, name) the code in CODE uses from outside the name's own definition."""
    used = {(module, "commands") for module in command_modules()}
    for m in modules.values():
        if m.path.relative_to(ROOT).parts[0] in CODE:
            used |= _uses_in(m, modules)
    return used


def command_modules() -> set[str]:
    """The modules the components.yaml manifests list under `commands:`."""
    found = set()
    for manifest in (ROOT / "perseval").rglob("components.yaml"):
        package = ".".join(manifest.parent.relative_to(ROOT).parts)
        found |= {f"{package}.{m}" for m in (yaml.safe_load(manifest.read_text()).get("commands") or {}).values()}
    return found


def _uses_in(m: Module, modules: dict[str, Module]) -> set[tuple[str, str]]:
    used: set[tuple[str, str]] = set()
    aliases: dict[str, str] = {}  # local name -> the module it is bound to
    for _, node in m.nodes:
        if isinstance(node, ast.ImportFrom):
            source = absolute(m, node)
            for a in node.names:
                if f"{source}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{source}.{a.name}"
                used.add((source, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    for inside, node in m.nodes:
        if isinstance(node, ast.Name) and node.id in m.defined and node.id != inside:
            used.add((m.name, node.id))
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node.value)
            if dotted and dotted.split(".")[0] in aliases:
                head, *rest = dotted.split(".")
                used.add((".".join([aliases[head], *rest]), node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in m.defined:
            if any(REGISTERING.match(_last(d)) for d in node.decorator_list):
                used.add((m.name, node.name))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            used |= {(m.name, e.value) for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in m.docstrings:
            found = POINTER.match(node.value.strip())
            if found:  # a card's pointer is relative to perseval; the first part of attribute is the name
                module, name = found[1], found[2].split(".")[0]
                used |= {(module, name), (f"perseval.{module}", name)}
    return used


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _last(decorator: ast.AST) -> str:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def uncalled(modules: dict[str, Module]) -> list[str]:
    used = uses(modules)
    return sorted(f"{m.name}:{name}" for m in modules.values() if m.name.startswith("perseval.")
                  for name in m.defined if (m.name, name) not in used and (m.name, name) not in ALLOWED)


def reexported(modules: dict[str, Module]) -> list[str]:
    """`from <module> import name` where that module does not bind `name` itself, and `__all__` entries a
    module does not bind."""
    found = []
    for m in modules.values():
        where = str(m.path.relative_to(ROOT))
        for _, node in m.nodes:
            if isinstance(node, ast.ImportFrom) and not where.startswith(REEXPORT_ALLOWED):
                source = absolute(m, node)
                owner = modules.get(source)
                if owner is None and source.split(".")[0] in OURS:
                    found.append(f"{where}:{node.lineno} imports from {source}, which does not exist")
                found += [f"{where}:{node.lineno} imports {a.name} from {source}, which does not define it"
                          for a in node.names if owner is not None and a.name not in owner.bound
                          and f"{source}.{a.name}" not in modules]
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                       for t in node.targets):
                listed = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
                found += [f"{where}: __all__ lists {n}, which it does not define" for n in listed if n not in m.bound]
    return found


def pass_through(modules: dict[str, Module]) -> list[str]:
    """Names a perseval module imports but never uses (a string annotation's words count as uses)."""
    found = []
    for m in modules.values():
        if not m.name.startswith("perseval.") or str(m.path.relative_to(ROOT)).startswith(REEXPORT_ALLOWED):
            continue
        names = {n.id for _, n in m.nodes if isinstance(n, ast.Name)}
        names |= {w for _, n in m.nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and id(n) not in m.docstrings for w in re.findall(r"\w+", n.value)}
        for _, node in m.nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", "") != "__future__":
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    if local not in names and local != "*":
                        found.append(f"{m.path.relative_to(ROOT)}:{node.lineno} imports {local}, unused")
    return found


@functools.cache
def repository() -> dict[str, Module]:
    return parse()


def test_every_function_and_class_of_perseval_has_a_caller_outside_tests():
    assert uncalled(repository()) == []


def test_nothing_is_re_exported():
    assert reexported(repository()) == []


def test_no_perseval_module_imports_a_name_it_does_not_use():
    assert pass_through(repository()) == []


def test_the_allowed_names_exist_and_still_have_no_caller():
    """An allowance for something that was removed or gained a caller is stale: take it out."""
    modules = repository()
    used = uses(modules)
    assert {k: v for k, v in ALLOWED.items() if k[1] not in modules[k[0]].defined or k in used} == {}


def test_the_checks_see_a_dead_function_a_re_export_and_an_unused_import(tmp_path, monkeypatch):
    package = tmp_path / "perseval" / "wing"
    package.mkdir(parents=True)
    for folder in ("flows", "tasks", "scripts", "tests"):
        (tmp_path / folder).mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text('"""Names b.only_in_a_docstring."""\nimport json\n\n\ndef used():\n    return 1\n\n\n'
                                  'def dead():\n    return dead()\n\n\ndef only_in_a_docstring():\n    pass\n\n\n'
                                  'def by_pointer():\n    pass\n\n\n'
                                  '@register_judge("x")\nclass Registered:\n    pass\n\n\ndef exported():\n    pass\n\n\n'
                                  '__all__ = ["exported"]\n')
    (package / "b.py").write_text('from perseval.wing.a import used\nfrom .a import json\n\nPOINTERS = {"x": '
                                  '"wing.a:by_pointer"}\n__all__ = ["used"]\n\n\ndef f():\n    return used()\n')
    (tmp_path / "scripts" / "s.py").write_text("from perseval.wing import b\n\nb.f()\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    modules = parse(root=tmp_path)
    assert uncalled(modules) == ["perseval.wing.a:dead", "perseval.wing.a:only_in_a_docstring"]
    assert reexported(modules) == ["perseval/wing/b.py:2 imports json from perseval.wing.a, which does not define it",
                                   "perseval/wing/b.py: __all__ lists used, which it does not define"]
    assert pass_through(modules) == ["perseval/wing/a.py:2 imports json, unused",
                                     "perseval/wing/b.py:2 imports json, unused"]


if __name__ == "__main__":
    print("\n".join([*uncalled(repository()), *reexported(repository()), *pass_through(repository())]))
