"""Dense retrieval: FlagEmbedding embeddings (FlagModel, or BGEM3FlagModel for BGE-M3) in FAISS, per owner.

Indexes are built on CPU and saved as CPU indexes; with `index.device: gpu` (or
`auto` and a GPU present) they are moved to the GPU for search (faiss-gpu).
Inner product on normalised vectors is cosine similarity.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from perseval.kernel.params import Params
from perseval.kernel.registry import register_retriever
from perseval.retrieval.base import Retriever
from perseval.retrieval.chunking import Tokenizer
from perseval.retrieval.embedder import Embedder, EmbedderConfig


class IndexConfig(Params):
    type: Literal["flat_ip", "hnsw"] = "flat_ip"
    device: Literal["cpu", "gpu", "auto"] = "cpu"


class DenseParams(Params):
    embedder: EmbedderConfig
    index: IndexConfig = IndexConfig()


def _faiss() -> ModuleType:
    # imported on first index use, not when the retriever registers: `perseval validate` never needs it
    import faiss

    return faiss


def use_gpu(cfg: IndexConfig) -> bool:
    faiss = _faiss()
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if cfg.device == "gpu" and gpus == 0:
        raise RuntimeError("index.device is 'gpu' but FAISS sees no GPU (is faiss-gpu installed?)")
    return cfg.device == "gpu" or (cfg.device == "auto" and gpus > 0)


def new_index(dim: int, cfg: IndexConfig) -> Any:
    faiss = _faiss()
    if cfg.type == "hnsw":
        return faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    return faiss.IndexFlatIP(dim)


def to_device(index: Any, cfg: IndexConfig) -> Any:
    if use_gpu(cfg) and cfg.type == "flat_ip":
        faiss = _faiss()
        return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    return index


@register_retriever("dense")
class DenseRetriever(Retriever[DenseParams]):

    def __init__(self, *args: Any, embedder: Embedder | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:  # loaded on first use: a shard that never searches never loads it
            self._embedder = Embedder(self.params.embedder)
        return self._embedder

    def tokenizer(self) -> Tokenizer:
        return self.embedder.tokenizer

    def index_owner(self, texts: list[str], path: Path) -> None:
        self.index_owners([(texts, path)])

    def index_owners(self, batch: list[tuple[list[str], Path]]) -> None:
        """One encode call for the whole group, then each owner's rows into its own index."""
        vecs = self.embedder.encode_passages([t for texts, _ in batch for t in texts])
        start = 0
        for texts, path in batch:
            index = new_index(vecs.shape[1], self.params.index)
            index.add(vecs[start:start + len(texts)])
            _faiss().write_index(index, str(path))
            start += len(texts)

    def load_owner(self, path: Path) -> Any:
        return to_device(_faiss().read_index(str(path)), self.params.index)

    def search_owner(self, index: Any, query: str, k: int) -> list[tuple[int, float]]:
        scores, rows = index.search(self.embedder.encode_queries([query]), k)
        return [(int(r), float(s)) for s, r in zip(scores[0], rows[0]) if r >= 0]
