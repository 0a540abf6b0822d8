"""The contract of a retriever: chunk every owner's history, index each owner, search one owner.

Layout of an index folder, shared by every retriever kind: `chunks.parquet`
(owner, doc_id, chunk_id, text, row = position in that owner's index) and one
index per owner under `owners/<slug>` (a file or a folder, the kind decides).
A retriever kind implements the three per-owner steps; chunking, the chunk
table and turning hits into passages are written once, here.
"""
from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from perseval.retrieval.settings import ChunkingConfig
from perseval.kernel.params import Configurable, P, Params
from perseval.core.instances import Document, Passage
from perseval.retrieval.chunking import Tokenizer, chunk_text
from perseval.core.schema import CHUNKS
from perseval.core.store import atomic_write_parquet

CHUNKS_FILE = "chunks.parquet"
# Owners are indexed in groups of about this many chunks: one encode call per group instead of per owner
# (an embedding model's per-call cost, e.g. FlagEmbedding's batch-size probe, made the index stage 0.44x a
# single encode of the same passages), while the vectors held at once stay bounded (20k x 1024 floats = 80 MB).
INDEX_BATCH_CHUNKS = 20_000
OWNERS_DIR = "owners"


def owner_slug(owner: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)[:48]
    return f"{safe}-{hashlib.sha1(owner.encode()).hexdigest()[:8]}"


class Retriever(Configurable[P], ABC):
    """`params` is the validated `params:` of the retriever's YAML; `chunking` its chunking block."""

    kind: ClassVar[str]  # set by @register_retriever

    def __init__(self, params: Params | Mapping[str, Any] | None = None, chunking: ChunkingConfig | None = None):
        super().__init__(params)
        self.chunking = chunking or ChunkingConfig()

    # --- what a kind implements -------------------------------------------------------------------

    @abstractmethod
    def tokenizer(self) -> Tokenizer:
        """The tokenizer chunk sizes are counted in."""

    @abstractmethod
    def index_owner(self, texts: list[str], path: Path) -> None:
        """Index one owner's chunks (row i = texts[i]) and save the index at `path`."""

    def index_owners(self, batch: list[tuple[list[str], Path]]) -> None:
        """Index several owners at once (a kind that encodes, encodes them in one call). Default: one by one."""
        for texts, path in batch:
            self.index_owner(texts, path)

    @abstractmethod
    def load_owner(self, path: Path) -> Any:
        """The saved index of one owner, ready to search."""

    @abstractmethod
    def search_owner(self, index: Any, query: str, k: int) -> list[tuple[int, float]]:
        """(row, score) of the best `k` chunks, best first."""

    # --- shared -----------------------------------------------------------------------------------

    def build(self, documents: Sequence[Document], out_dir: str | Path) -> dict[str, int]:
        """Chunk, index and save every owner's documents under `out_dir`; returns counts."""
        out = Path(out_dir)
        (out / OWNERS_DIR).mkdir(parents=True, exist_ok=True)
        by_owner: dict[str, list[Document]] = defaultdict(list)
        for doc in documents:
            by_owner[doc.owner].append(doc)
        tok = self.tokenizer()
        rows: list[dict[str, Any]] = []
        batch: list[tuple[list[str], Path]] = []
        pending = 0  # chunks in `batch`
        for owner, docs in sorted(by_owner.items()):
            chunks = [(d.doc_id, i, text) for d in docs
                      for i, text in enumerate(chunk_text(d.text, tok, self.chunking.size, self.chunking.overlap))]
            if not chunks:
                continue
            batch.append(([t for _, _, t in chunks], out / OWNERS_DIR / owner_slug(owner)))
            rows += [{"owner": owner, "doc_id": d, "chunk_id": c, "text": t, "row": r}
                     for r, (d, c, t) in enumerate(chunks)]
            pending += len(chunks)
            if pending >= INDEX_BATCH_CHUNKS:
                self.index_owners(batch)
                batch, pending = [], 0
        if batch:
            self.index_owners(batch)
        atomic_write_parquet(pa.Table.from_pylist(rows, schema=CHUNKS), out / CHUNKS_FILE)
        return {"owners": len(by_owner), "documents": len(documents), "chunks": len(rows)}

    def open(self, index_dir: str | Path, owners: set[str] | None = None) -> "ChunkIndex":
        """A searcher over the saved index; `owners`: load only these owners' chunks (a shard's users)."""
        return ChunkIndex(self, Path(index_dir), owners)


class ChunkIndex:
    """Searches the per-owner indexes of one index folder, loading each owner's index on first use."""

    def __init__(self, retriever: Retriever, index_dir: Path, owners: set[str] | None):
        self.retriever, self.dir = retriever, index_dir
        filters = [("owner", "in", sorted(owners))] if owners is not None else None
        table = pq.read_table(index_dir / CHUNKS_FILE, filters=filters)
        self._chunks: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
        for row in table.to_pylist():
            self._chunks[row["owner"]][row["row"]] = row
        self._indexes: dict[str, Any] = {}

    def has_owner(self, owner: str) -> bool:
        return bool(self._chunks.get(owner))

    def search(self, owner: str, query: str, k: int) -> list[Passage]:
        chunks = self._chunks.get(owner, {})
        if k <= 0 or not chunks:
            return []
        if owner not in self._indexes:
            self._indexes[owner] = self.retriever.load_owner(self.dir / OWNERS_DIR / owner_slug(owner))
        hits = self.retriever.search_owner(self._indexes[owner], query, min(k, len(chunks)))
        return [Passage(chunks[r]["doc_id"], chunks[r]["chunk_id"], chunks[r]["text"], float(s))
                for r, s in hits if r in chunks]
