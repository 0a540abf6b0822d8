"""The lazy registry: a name is found in its folder's components.yaml and only the module that registers it
is imported; the manifests agree with what importing everything registers."""
from __future__ import annotations

import json
import subprocess
import sys

from perseval.kernel import registry

from .conftest import REPO


def test_the_manifests_name_every_builtin_registration_and_nothing_else():
    index = {k: m for k, m in registry.manifest_index().items() if k[0] != registry.COMMANDS}
    registry.scan()
    builtin = {(reg.label, name): cls.__module__
               for reg in (registry.BENCHMARKS, registry.AGENTS, registry.JUDGES, registry.RETRIEVERS)
               for name, cls in reg.table.items() if cls.__module__.startswith("perseval.")}
    assert index == builtin
    assert len(index) >= 30 and ("AGENTS", "rag") in index


PROBE = """
import json, sys
from perseval.experiment.load import load_experiment
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
    loaded = _modules_after_plan("perseval/benchmarks/apeb/configs/experiments/apeb_cpu.yaml")
    every = set(registry.manifest_index().values())
    assert "perseval.benchmarks.apeb.benchmark" in loaded
    others = {m for m in loaded & every if m.startswith(("perseval.benchmarks.iba.", "perseval.benchmarks.bespoke."))}
    assert others == set()
    assert len(every - loaded) > len(every) // 2  # most registering modules stay unimported


def test_a_builtin_registration_missing_from_its_manifest_is_refused(monkeypatch):
    """A decorator whose name no components.yaml lists would never be found by name: refused at import,
    naming the file to edit (a decorator split over lines or written another way cannot hide)."""
    import pytest
    from perseval.core.errors import ConfigError

    reg = registry.Registry("agent kind", "kind", "AGENTS")

    class Unlisted:
        __module__ = "perseval.agents.unlisted"

    with pytest.raises(ConfigError, match=r"not listed in its folder's components.yaml.*agent:"):
        reg.register("unlisted")(Unlisted)


def test_a_manifest_with_an_unknown_kind_names_the_file_and_the_kinds(tmp_path):
    import pytest
    from perseval.core.errors import ConfigError

    path = tmp_path / "components.yaml"
    path.write_text("agents:\n  x: mod\n")
    with pytest.raises(ConfigError, match=r"components.yaml.*\['agents'\].*allowed"):
        registry.read_manifest(path, "pkg")
