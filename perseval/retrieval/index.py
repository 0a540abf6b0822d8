"""One FAISS index per owner (user history or search corpus), persisted and reused.

Layout of an index folder: `chunks.parquet` (owner, doc_id, chunk_id, text,
row = position in that owner's index) and `faiss/<slug>.index` per owner.
Indexes are built on CPU and saved as CPU indexes; with `device: gpu` (or
`auto` and a GPU present) they are moved to the GPU for building and search.
"""
from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import faiss
import pyarrow as pa
import pyarrow.parquet as pq

from perseval.config import IndexConfig, RetrieverConfig
from perseval.records import Document, Passage
from perseval.retrieval.chunking import chunk_text
from perseval.retrieval.embedder import Embedder
from perseval.schema import CHUNKS
from perseval.store import atomic_write_parquet


def owner_slug(owner: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)[:48]
    return f"{safe}-{hashlib.sha1(owner.encode()).hexdigest()[:8]}"


def use_gpu(cfg: IndexConfig) -> bool:
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if cfg.device == "gpu" and gpus == 0:
        raise RuntimeError("index.device is 'gpu' but FAISS sees no GPU (is faiss-gpu installed?)")
    return cfg.device == "gpu" or (cfg.device == "auto" and gpus > 0)


def new_index(dim: int, cfg: IndexConfig) -> Any:
    # Inner product on normalised vectors = cosine similarity.
    if cfg.type == "hnsw":
        return faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    return faiss.IndexFlatIP(dim)


def to_device(index: Any, cfg: IndexConfig) -> Any:
    if use_gpu(cfg) and cfg.type == "flat_ip":
        return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    return index


def build_index(documents: list[Document], cfg: RetrieverConfig, out_dir: str | Path,
                embedder: Embedder | None = None) -> dict[str, int]:
    """Chunk, embed and index every owner's documents under `out_dir`; returns counts."""
    out = Path(out_dir)
    (out / "faiss").mkdir(parents=True, exist_ok=True)
    emb = embedder or Embedder(cfg.embedder)
    by_owner: dict[str, list[Document]] = defaultdict(list)
    for doc in documents:
        by_owner[doc.owner].append(doc)
    rows: list[dict[str, Any]] = []
    for owner, docs in sorted(by_owner.items()):
        texts, meta = [], []
        for doc in docs:
            for i, chunk in enumerate(chunk_text(doc.text, emb.tokenizer, cfg.chunking.size, cfg.chunking.overlap)):
                meta.append((doc.doc_id, i))
                texts.append(chunk)
        if not texts:
            continue
        vecs = emb.encode_passages(texts)
        index = new_index(vecs.shape[1], cfg.index)
        index.add(vecs)
        faiss.write_index(index, str(out / "faiss" / f"{owner_slug(owner)}.index"))
        rows += [{"owner": owner, "doc_id": d, "chunk_id": c, "text": t, "row": r}
                 for r, ((d, c), t) in enumerate(zip(meta, texts))]
    atomic_write_parquet(pa.Table.from_pylist(rows, schema=CHUNKS), out / "chunks.parquet")
    return {"owners": len(by_owner), "documents": len(documents), "chunks": len(rows)}


class HistoryIndex:
    """Searches the persisted per-owner indexes with the retriever's query encoder."""

    def __init__(self, index_dir: str | Path, cfg: RetrieverConfig, owners: set[str] | None = None):
        """`owners`: load only these owners' chunks (a shard needs its own users, not all of them)."""
        self.dir, self.cfg = Path(index_dir), cfg
        filters = [("owner", "in", sorted(owners))] if owners is not None else None
        table = pq.read_table(self.dir / "chunks.parquet", filters=filters)
        self._chunks: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in table.to_pylist():
            self._chunks[row["owner"]].append(row)
        self._indexes: dict[str, Any] = {}
        self._embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self.cfg.embedder)
        return self._embedder

    def _index(self, owner: str) -> Any:
        if owner not in self._indexes:
            cpu = faiss.read_index(str(self.dir / "faiss" / f"{owner_slug(owner)}.index"))
            self._indexes[owner] = to_device(cpu, self.cfg.index)
        return self._indexes[owner]

    def search(self, owner: str, query: str, k: int) -> list[Passage]:
        chunks = self._chunks.get(owner, [])
        if k <= 0 or not chunks:
            return []
        qvec = self.embedder.encode_queries([query])
        scores, rows = self._index(owner).search(qvec, min(k, len(chunks)))
        by_row = {c["row"]: c for c in chunks}
        return [Passage(by_row[r]["doc_id"], by_row[r]["chunk_id"], by_row[r]["text"], float(s))
                for s, r in zip(scores[0], rows[0]) if r >= 0]
