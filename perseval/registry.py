"""Registries of benchmarks and agents.

A new benchmark or agent is one module that registers itself with a
decorator, plus one YAML under configs/; the packages are scanned on first
use, so no flow or central list needs an edit.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, TypeVar

from perseval.errors import ConfigError

T = TypeVar("T")

_BENCHMARKS: dict[str, type] = {}
_AGENTS: dict[str, type] = {}
_scanned = False


def _register(table: dict[str, type], key: str, attr: str) -> Callable[[type[T]], type[T]]:
    """Register `cls` under `key` and set `cls.<attr> = key`, so the name is written once."""
    def deco(cls: type[T]) -> type[T]:
        if key in table and table[key] is not cls:
            raise ValueError(f"{key!r} is registered twice ({table[key]} and {cls})")
        setattr(cls, attr, key)
        table[key] = cls
        return cls

    return deco


def register_benchmark(name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: a benchmark under `name` (also set as its `name` attribute)."""
    return _register(_BENCHMARKS, name, "name")


def register_agent(kind: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: an agent under `kind` (also set as its `kind` attribute)."""
    return _register(_AGENTS, kind, "kind")


def _scan() -> None:
    global _scanned
    if _scanned:
        return
    for pkg_name in ("perseval.benchmarks", "perseval.agents"):
        pkg = importlib.import_module(pkg_name)
        for mod in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
            importlib.import_module(mod.name)
    _scanned = True


def benchmark_class(name: str) -> type:
    _scan()
    if name not in _BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}; registered: {sorted(_BENCHMARKS)}")
    return _BENCHMARKS[name]


def agent_class(kind: str) -> type:
    _scan()
    if kind not in _AGENTS:
        raise ConfigError(f"unknown agent kind {kind!r}; registered: {sorted(_AGENTS)}")
    return _AGENTS[kind]


def registered() -> dict[str, list[str]]:
    _scan()
    return {"benchmarks": sorted(_BENCHMARKS), "agents": sorted(_AGENTS)}
