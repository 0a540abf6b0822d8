"""Stable content keys: every stage output lives under a key that hashes its inputs."""
from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal configs hash equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_key(*parts: Any, length: int = 16) -> str:
    """Hex key of any JSON-serialisable parts (configs, upstream keys)."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()
    return digest[:length]


def file_digest(path: str, chunk: int = 1 << 20) -> str:
    """sha256 of a file, used as a model's identity when it has no revision."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
