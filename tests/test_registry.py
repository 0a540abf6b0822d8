"""The lazy registry: a name is found in the packages' source and only the module that registers it is
imported; the source index agrees with what importing everything registers."""
from __future__ import annotations

import json
import subprocess
import sys

from perseval.kernel import registry

from .conftest import REPO


def test_the_source_index_names_every_builtin_registration_and_nothing_else():
    index = registry.source_index()
    registry.scan()
    builtin = {(reg.label, name): cls.__module__
               for reg in (registry.BENCHMARKS, registry.AGENTS, registry.JUDGES, registry.RETRIEVERS)
               for name, cls in reg.table.items() if cls.__module__.startswith("perseval.")}
    assert index == builtin
    assert len(index) >= 30 and ("AGENTS", "rag") in index


PROBE = """
import json, sys
from perseval.setup.experiment import load_experiment
from perseval.pipeline.plan import make_plan
plan = make_plan(load_experiment(sys.argv[1]))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("perseval."))))
"""


def _modules_after_plan(config: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, config], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_plan_imports_only_the_components_it_names():
    """An APeB-only experiment imports APeB's modules, none of IBA's or Bespoke's components."""
    loaded = _modules_after_plan("configs/experiments/apeb_cpu.yaml")
    every = set(registry.source_index().values())
    assert "perseval.benchmarks.apeb.benchmark" in loaded
    others = {m for m in loaded & every if m.startswith(("perseval.benchmarks.iba.", "perseval.benchmarks.bespoke."))}
    assert others == set()
    assert len(every - loaded) > len(every) // 2  # most registering modules stay unimported
