"""Registries of the four component kinds: benchmarks, agents, judges and retrievers.

A new component is one module that registers its class with a decorator, plus
one YAML under configs/; no flow, plan or central list needs an edit. Modules
are found three ways: each folder of perseval's own packages lists what it
registers in a components.yaml (name -> module, read without importing anything) and a lookup imports only
the module that registers the name; an installed package adds modules through the
entry-point group `perseval.plugins` (the value names a module to import); an
experiment file lists modules or .py files under `plugins:`. Listing every name
(`names()`, error messages) still imports everything, once.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import traceback
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from perseval.core.errors import ConfigError
from perseval.core.plugin_files import import_plugin_file
from perseval.core.yaml_text import read_yaml_file

T = TypeVar("T")

BUILTIN_PACKAGES = ("perseval.benchmarks", "perseval.agents", "perseval.judges", "perseval.retrieval")
ENTRY_POINT_GROUP = "perseval.plugins"


class Registry:
    """Name -> class for one component kind; `attr` is the class attribute that holds the name."""

    def __init__(self, what: str, attr: str, label: str):
        self.what, self.attr, self.label = what, attr, label  # label: the module-level name (source index key)
        self.table: dict[str, type] = {}

    def register(self, key: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: register under `key` and set `cls.<attr> = key`, so the name is written once."""
        def deco(cls: type[T]) -> type[T]:
            if key in self.table and self.table[key] is not cls:
                raise ConfigError(f"{self.what} {key!r} is registered twice ({self.table[key]} and {cls})")
            builtin = manifest_index().get((self.label, key))
            if builtin and cls.__module__ != builtin:  # a plugin may not shadow a built-in not yet imported
                raise ConfigError(f"{self.what} {key!r} is registered twice (built-in {builtin} and {cls})")
            if not builtin and _is_builtin(cls.__module__):  # else a lookup by name would never find it
                raise ConfigError(f"{self.what} {key!r} ({cls.__module__}) is not listed in its folder's "
                                  f"{MANIFEST}: add `{key}: <module>` under `{self.what.split()[0]}:`")
            setattr(cls, self.attr, key)
            self.table[key] = cls
            return cls

        return deco

    def get(self, key: str) -> type:
        if key not in self.table:
            _import_registering(self, key)
        if key not in self.table:
            scan()
        if key not in self.table:
            raise ConfigError(f"unknown {self.what} {key!r}; registered: {sorted(self.table)}")
        return self.table[key]

    def names(self) -> list[str]:
        scan()
        return sorted(self.table)


BENCHMARKS = Registry("benchmark", "name", "BENCHMARKS")
AGENTS = Registry("agent kind", "kind", "AGENTS")
JUDGES = Registry("judge kind", "kind", "JUDGES")
RETRIEVERS = Registry("retriever kind", "kind", "RETRIEVERS")

register_benchmark = BENCHMARKS.register
register_agent = AGENTS.register
register_judge = JUDGES.register
register_retriever = RETRIEVERS.register
benchmark_class = BENCHMARKS.get
agent_class = AGENTS.get
judge_class = JUDGES.get
retriever_class = RETRIEVERS.get

_scanned = False
MANIFEST = "components.yaml"  # in each component folder: what it registers, by kind (name -> module)
_KIND_LABELS = {"benchmark": "BENCHMARKS", "agent": "AGENTS", "judge": "JUDGES", "retriever": "RETRIEVERS"}


COMMANDS = "commands"  # a manifest's key for a benchmark's own commands (perseval.kernel.commands)


def read_manifest(path: Path, package: str) -> dict[tuple[str, str], str]:
    """(registry, name) -> absolute module, from one folder's components.yaml; `package` is that folder's.
    A benchmark's command module is listed under the key ("commands", name)."""
    data = read_yaml_file(path) or {}
    allowed = {**_KIND_LABELS, COMMANDS: COMMANDS}
    unknown = sorted(set(data) - set(allowed))
    if not isinstance(data, dict) or unknown:
        raise ConfigError(f"{path}: unknown kind(s) {unknown}; allowed: {sorted(allowed)}")
    return {(allowed[kind], str(name)): f"{package}.{module}"
            for kind, names in data.items() for name, module in (names or {}).items()}


def command_modules() -> dict[str, str]:
    """Benchmark name -> the built-in module holding its own commands (`perseval <name> ...`)."""
    return {name: module for (label, name), module in manifest_index().items() if label == COMMANDS}


@cache
def manifest_index() -> dict[tuple[str, str], str]:
    """(registry, name) -> the built-in module that registers it, from the components.yaml of every folder
    of perseval's component packages (no module is imported, no source is read)."""
    index: dict[tuple[str, str], str] = {}
    for pkg_name in BUILTIN_PACKAGES:
        spec = importlib.util.find_spec(pkg_name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            root = Path(location)
            for path in sorted(root.rglob(MANIFEST)):
                package = ".".join((pkg_name, *path.parent.relative_to(root).parts))
                for key, module in read_manifest(path, package).items():
                    if index.setdefault(key, module) != module:
                        raise ConfigError(f"{path}: {key[1]!r} is also listed for {index[key]}")
    return index


def _is_builtin(module: str) -> bool:
    return module.startswith(tuple(f"{p}." for p in BUILTIN_PACKAGES))


def _import_registering(registry: "Registry", key: str) -> None:
    """Import the built-in module that the manifests name for `key` in `registry`, if they name one."""
    if module := manifest_index().get((registry.label, key)):
        importlib.import_module(module)


def scan() -> None:
    """Import perseval's own component modules and every installed plugin, once per process."""
    global _scanned
    if _scanned:
        return
    _scanned = True  # first: a module being imported may itself look something up
    for pkg_name in BUILTIN_PACKAGES:
        pkg = importlib.import_module(pkg_name)
        for mod in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
            importlib.import_module(mod.name)
    load_entry_points()


def load_entry_points() -> None:
    """Import every module an installed package names under the `perseval.plugins` entry-point group."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a broken plugin names itself; sys.exit() in it ends nothing silently
            raise ConfigError(f"plugin entry point {ep.name!r} ({ep.value}) failed to load: "
                              f"{_raised(exc)}") from exc


PLUGIN_IS = ("a plugin is a module to import (a dotted name such as my_package.components, on the Python path "
             "or installed) or a .py file (a path, relative to the experiment file)")
_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# what a spec ending so names: a file that is no Python module (`plugins: [exp.yaml]` read as module `exp`)
_NOT_MODULES = {".yaml", ".yml", ".json", ".toml", ".txt", ".cfg", ".ini", ".csv", ".md", ".pyc", ".ipynb"}


def _plugin_where(where: str | None) -> str:
    return f"{where}: key 'plugins': " if where else ""


def resolve_plugins(specs: Iterable[str], base_dir: Path, where: str | None = None) -> tuple[str, ...]:
    """Plugin specs as every process can load them: .py files made absolute (relative to `base_dir`). A spec
    that is neither a module name nor a .py file is a ConfigError naming `where` (the experiment file) and
    the key."""
    out = []
    prefix = _plugin_where(where)
    for spec in specs:
        if spec.endswith(".py"):
            path = Path(spec) if Path(spec).is_absolute() else base_dir / spec
            if not path.is_file():
                raise ConfigError(f"{prefix}plugin {spec!r}: no file at {path}; {PLUGIN_IS}")
            out.append(str(path.resolve()))
        elif not _MODULE_NAME.fullmatch(spec) or Path(spec).suffix.lower() in _NOT_MODULES:
            raise ConfigError(f"{prefix}{spec!r} is neither a module name nor a .py file: {PLUGIN_IS}")
        else:
            out.append(spec)
    return tuple(out)


def load_plugins(specs: Iterable[str], where: str | None = None) -> None:
    """Import each plugin (a module name, or an absolute .py path from resolve_plugins), once; `where` (the
    experiment file) is named with the key in what a failed import says."""
    for spec in specs:
        try:
            if spec.endswith(".py"):
                import_plugin_file(Path(spec))
            else:
                importlib.import_module(spec)
        except ConfigError as exc:  # a component registered twice, say: which plugin of which file did it
            raise ConfigError(f"{_plugin_where(where)}plugin {spec!r}: {exc}") from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: a plugin's sys.exit() made a run that ran nothing exit 0
            hint = f"; {PLUGIN_IS}" if isinstance(exc, ModuleNotFoundError) and exc.name and \
                spec.startswith(exc.name) else ""
            raise ConfigError(f"{_plugin_where(where)}plugin {spec!r} failed to import{_raised_at(exc)}: "
                              f"{_raised(exc)}{hint}") from exc


def _raised(exc: BaseException) -> str:
    """What a plugin raised, in words: sys.exit() named as such (its code alone would read as no error)."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) on import; a plugin must not end the process"
    return f"{type(exc).__name__}: {exc}"


def _raised_at(exc: BaseException) -> str:
    """` at <file>, line <n>`: the last line outside perseval and the import machinery the error passed."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "importlib" not in f.filename and not f.filename.startswith(str(Path(__file__).parents[1]))]
    return f" at {frames[-1].filename}, line {frames[-1].lineno}" if frames else ""
