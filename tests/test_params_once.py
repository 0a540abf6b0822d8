"""A component's parameters are declared once, as the type argument of its base (issue 41)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from perseval.agents.base import Agent
from perseval.core.errors import ConfigError
from perseval.kernel import registry
from perseval.kernel.params import NoParams, Params

from .conftest import REPO


class Budget(Params):
    top_k: int = 3


class Other(Params):
    depth: int = 1


class Budgeted(Agent[Budget]):
    async def act(self, instance, ctx, repeat, name):  # pragma: no cover - never run
        raise NotImplementedError


class Overridden(Budgeted):
    Params = Other  # a concrete component's subclass may still take other parameters


def test_the_type_argument_is_the_params_model_and_validates():
    assert Budgeted.Params is Budget and Budgeted({"top_k": 5}).params.top_k == 5
    with pytest.raises(ConfigError, match="top_kk"):
        Budgeted({"top_kk": 5})
    assert Overridden.Params is Other and Overridden({"depth": 2}).params.depth == 2
    assert Agent.Params is NoParams


def test_every_registered_component_takes_its_params_from_its_base():
    """Each built-in component with parameters names them in its base; no `Params = X` beside
    `params: X` is left but the one subclass of a concrete benchmark that takes other parameters."""
    registry.scan()
    typed = [cls for reg in (registry.BENCHMARKS, registry.AGENTS, registry.JUDGES, registry.RETRIEVERS)
             for cls in reg.table.values() if cls.__module__.startswith("perseval.") and cls.Params is not NoParams]
    assert len(typed) >= 25
    pairs = [str(p.relative_to(REPO)) for p in (REPO / "perseval").rglob("*.py")
             if re.search(r"^    Params = \w+\n    params: \w+$", p.read_text(), re.M)]
    assert pairs == ["perseval/benchmarks/bespoke/history_benchmark.py"]
