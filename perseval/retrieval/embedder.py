"""Embedders through FlagEmbedding: FlagModel (e.g. the bundled MiniLM) or BGEM3FlagModel (BGE-M3)."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from perseval.core.errors import ConfigError
from perseval.kernel.params import Params


class EmbedderConfig(Params):
    kind: Literal["flag", "m3"] = "flag"  # FlagModel or BGEM3FlagModel
    model: str  # path, HF id, or package:<module>
    pooling: Literal["cls", "mean"] = "cls"
    normalize: bool = True
    query_instruction: str = ""
    batch_size: int = 64
    max_length: int = 512
    fp16: bool = False
    device: str | None = None  # None: FlagEmbedding picks (cuda when present)


def resolve_model_path(spec: str) -> str:
    """`package:<module>[/<sub>]` -> the folder inside an installed package holding config.json; else `spec`."""
    if not spec.startswith("package:"):
        return spec
    module, _, sub = spec[len("package:"):].partition("/")
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(f"embedder model {spec!r}: package {module!r} is not installed")
    base = Path(list(found.submodule_search_locations)[0]) / sub
    hits = sorted(base.rglob("config.json"), key=lambda p: len(p.parts))
    if not hits:
        raise ConfigError(f"embedder model {spec!r}: no config.json under {base}")
    return str(hits[0].parent)


class Embedder:
    """Dense, normalised embeddings of queries and passages."""

    def __init__(self, cfg: EmbedderConfig):
        self.cfg = cfg
        self.path = resolve_model_path(cfg.model)
        with _ENCODING:  # two threads asking at once load the model once (lru_cache alone would load it twice)
            self._model = _load(cfg.kind, self.path, cfg.pooling, cfg.normalize, cfg.query_instruction, cfg.fp16,
                                cfg.device, cfg.batch_size, cfg.max_length)

    @property
    def tokenizer(self) -> "LockedTokenizer":
        """The model's tokenizer, for counting chunk sizes: through the encode lock, as a fast tokenizer's
        truncation settings are state that an encode on another thread changes ("Already borrowed")."""
        return LockedTokenizer(self._model.tokenizer)

    def _encode(self, texts: list[str], queries: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype="float32")
        # FlagEmbedding draws per-batch tqdm bars that ignore TQDM_DISABLE; keep them off the stage bars.
        # One encode at a time in a process: tasks may run on threads of one process (dask.in_process), where
        # redirect_stderr is process-wide and a fast tokenizer shared by two threads fails ("Already
        # borrowed"); one encode already uses every core (torch's threads)
        with _ENCODING, contextlib.redirect_stderr(io.StringIO()):
            return self._encode_quietly(texts, queries)

    def _encode_quietly(self, texts: list[str], queries: bool) -> np.ndarray:
        if self.cfg.kind == "m3":
            out = self._model.encode(texts, batch_size=self.cfg.batch_size, max_length=self.cfg.max_length)
            vecs = out["dense_vecs"]
        elif queries:
            vecs = self._model.encode_queries(texts, batch_size=self.cfg.batch_size, max_length=self.cfg.max_length)
        else:
            vecs = self._model.encode_corpus(texts, batch_size=self.cfg.batch_size, max_length=self.cfg.max_length)
        return np.ascontiguousarray(np.asarray(vecs, dtype="float32").reshape(len(texts), -1))

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, queries=True)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, queries=False)


_ENCODING = threading.Lock()


class LockedTokenizer:
    """encode/decode of a tokenizer, one thread at a time with every encode of this process."""

    def __init__(self, tokenizer: Any):
        self._tokenizer = tokenizer

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        with _ENCODING:
            return self._tokenizer.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        with _ENCODING:
            return self._tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


@lru_cache(maxsize=4)
def _load(kind: str, path: str, pooling: str, normalize: bool, instruction: str, fp16: bool,
          device: str | None, batch_size: int, max_length: int) -> Any:
    # One model per process and config: Dask workers reuse it across the shards they run.
    from FlagEmbedding import BGEM3FlagModel, FlagModel

    devices = device if device else None
    if kind == "m3":
        return BGEM3FlagModel(path, use_fp16=fp16, devices=devices, batch_size=batch_size,
                              passage_max_length=max_length, query_max_length=max_length)
    return FlagModel(path, pooling_method=pooling, normalize_embeddings=normalize,
                     query_instruction_for_retrieval=instruction or None, use_fp16=fp16, devices=devices,
                     batch_size=batch_size, query_max_length=max_length, passage_max_length=max_length)
