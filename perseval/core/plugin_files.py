"""Importing a plugin .py file as a module with a stable name, so every process that imports the same
file (the CLI, each Dask worker) gives its classes the same module name and pickles them alike."""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

from perseval.core.errors import ConfigError

PLUGIN_MODULE_PREFIX = "perseval_plugin_"


def import_plugin_file(path: Path) -> None:
    name = f"{PLUGIN_MODULE_PREFIX}{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"plugin {path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
