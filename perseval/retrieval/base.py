"""The contract of a retriever: chunk every owner's history, index each owner, search one owner.

An index folder is built in index shards: disjoint ranges of owners (perseval.pipeline.stages splits a
benchmark's owners so that each shard is one task of bounded memory). Shard s writes `chunks-<s>.parquet`
(owner, doc_id, chunk_id, text, row = position in that owner's index; its counts in the file's metadata),
last, so the shard is done when that file exists; and its owners' indexes: one per owner under `owners/<slug>`
(a file or a folder, the kind decides), or, for a packed kind, every owner of the shard in one
`owners-<s>.parquet` (BM25 over one LaMP profile is a few kB: 20,000 owners were 100,000 files, most of the
stage's time). An index built in one piece before shards has one `chunks.parquet`; it is read the same way.
A retriever kind implements the per-owner steps; chunking, the chunk tables and turning hits into passages
are written once, here.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import re
import time
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

CHUNKS_FILE = "chunks.parquet"  # the one chunk table of an index built before shards
SHARD_COUNTS = b"perseval.index"  # a shard's counts (owners, documents, chunks, seconds), in its chunk file's metadata
# Owners are indexed in groups of about this many chunks: one encode call per group instead of per owner
# (an embedding model's per-call cost, e.g. FlagEmbedding's batch-size probe, made the index stage 0.44x a
# single encode of the same passages), while the vectors held at once stay bounded (20k x 1024 floats = 80 MB).
INDEX_BATCH_CHUNKS = 20_000
OWNERS_DIR = "owners"


def owner_slug(owner: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)[:48]
    return f"{safe}-{hashlib.sha1(owner.encode()).hexdigest()[:8]}"


def chunks_file(shard: int) -> str:
    return f"chunks-{shard:05d}.parquet"


def chunk_files(index_dir: Path) -> list[Path]:
    """Every shard's chunk table (or the one table of an index built in one piece)."""
    return sorted(index_dir.glob("chunks*.parquet"))


def pack_of(chunk_file: Path) -> Path:
    """The packed owners' indexes written beside a shard's chunk table."""
    return chunk_file.with_name(chunk_file.name.replace("chunks", "owners", 1))


def shard_counts(chunk_file: Path) -> dict[str, float]:
    raw = (pq.read_schema(chunk_file).metadata or {}).get(SHARD_COUNTS)
    return json.loads(raw) if raw else {}


class Retriever(Configurable[P], ABC):
    """`params` is the validated `params:` of the retriever's YAML; `chunking` its chunking block."""

    kind: ClassVar[str]  # set by @register_retriever
    # True: the kind keeps every owner's index of a shard in one table (pack_owners / unpack_owner) instead of
    # one file per owner (index_owners / load_owner)
    packed: ClassVar[bool] = False
    layout: ClassVar[int] = 1  # the version of what the kind writes: raise it when that changes (it enters the key)

    def __init__(self, params: Params | Mapping[str, Any] | None = None, chunking: ChunkingConfig | None = None):
        super().__init__(params)
        self.chunking = chunking or ChunkingConfig()

    # --- what a kind implements -------------------------------------------------------------------

    @abstractmethod
    def tokenizer(self) -> Tokenizer:
        """The tokenizer chunk sizes are counted in."""

    def index_owner(self, texts: list[str], path: Path) -> None:
        """Index one owner's chunks (row i = texts[i]) and save the index at `path` (a kind that is not packed)."""
        raise NotImplementedError(f"retriever kind {self.kind!r} implements neither index_owner nor pack_owners")

    def index_owners(self, batch: list[tuple[list[str], Path]]) -> None:
        """Index several owners at once (a kind that encodes, encodes them in one call). Default: one by one."""
        for texts, path in batch:
            self.index_owner(texts, path)

    def load_owner(self, path: Path) -> Any:
        """The saved index of one owner, ready to search (a kind that is not packed)."""
        raise NotImplementedError(f"retriever kind {self.kind!r} implements neither load_owner nor unpack_owner")

    def pack_owners(self, batch: list[list[str]]) -> pa.Table:
        """A packed kind: the indexes of several owners' chunks, one row each, in the batch's order."""
        raise NotImplementedError

    def unpack_owner(self, pack: pa.Table, row: int) -> Any:
        """A packed kind: the index of row `row` of a table pack_owners made, ready to search."""
        raise NotImplementedError

    @abstractmethod
    def search_owner(self, index: Any, query: str, k: int) -> list[tuple[int, float]]:
        """(row, score) of the best `k` chunks, best first."""

    # --- shared -----------------------------------------------------------------------------------

    def build(self, documents: Sequence[Document], out_dir: str | Path, shard: int = 0) -> dict[str, int]:
        """Chunk, index and save every owner's documents as index shard `shard` under `out_dir` (an index in one
        piece: shard 0 of all documents); returns counts."""
        out, t0 = Path(out_dir), time.monotonic()
        out.mkdir(parents=True, exist_ok=True)
        by_owner: dict[str, list[Document]] = defaultdict(list)
        for doc in documents:
            by_owner[doc.owner].append(doc)
        tok = self.tokenizer()
        columns: dict[str, list[Any]] = {name: [] for name in CHUNKS.names}
        batch: list[tuple[str, list[str]]] = []
        packs: list[pa.Table] = []
        pending = 0  # chunks in `batch`
        for owner, docs in sorted(by_owner.items()):
            chunks = [(d.doc_id, i, text) for d in docs
                      for i, text in enumerate(chunk_text(d.text, tok, self.chunking.size, self.chunking.overlap))]
            if not chunks:
                continue
            batch.append((owner, [t for _, _, t in chunks]))
            for name, values in zip(CHUNKS.names, ([owner] * len(chunks), *zip(*chunks), range(len(chunks)))):
                columns[name].extend(values)
            pending += len(chunks)
            if pending >= INDEX_BATCH_CHUNKS:
                packs += self._index(batch, out)
                batch, pending = [], 0
        if batch:
            packs += self._index(batch, out)
        counts = {"owners": len(by_owner), "documents": len(documents), "chunks": len(columns["owner"])}
        info = {**counts, "seconds": round(time.monotonic() - t0, 2)}
        table = pa.table(columns, schema=CHUNKS).replace_schema_metadata({SHARD_COUNTS: json.dumps(info)})
        if packs:
            atomic_write_parquet(pa.concat_tables(packs), pack_of(out / chunks_file(shard)))
        atomic_write_parquet(table, out / chunks_file(shard))  # last: the shard is done when its chunks are there
        return counts

    def _index(self, batch: list[tuple[str, list[str]]], out: Path) -> list[pa.Table]:
        if self.packed:
            pack = self.pack_owners([texts for _, texts in batch])
            return [pack.append_column("owner", pa.array([owner for owner, _ in batch], pa.string()))]
        (out / OWNERS_DIR).mkdir(exist_ok=True)
        self.index_owners([(texts, out / OWNERS_DIR / owner_slug(owner)) for owner, texts in batch])
        return []

    def open(self, index_dir: str | Path, owners: set[str] | None = None) -> "ChunkIndex":
        """A searcher over the saved index; `owners`: load only these owners' chunks (a shard's users)."""
        return ChunkIndex(self, Path(index_dir), owners)


def _may_hold(chunk_file: Path, wanted: list[str]) -> bool:
    """Whether a chunk table can hold one of `wanted` (sorted) owners, from its row groups' owner min/max:
    a run shard opens the few index shards its users are in, not every one."""
    meta = pq.ParquetFile(chunk_file).metadata
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(CHUNKS.get_field_index("owner")).statistics
        if stats is None or not stats.has_min_max:
            return True
        i = bisect.bisect_left(wanted, stats.min)
        if i < len(wanted) and wanted[i] <= stats.max:
            return True
    return False


class ChunkIndex:
    """Searches the per-owner indexes of one index folder, loading each owner's index on first use."""

    def __init__(self, retriever: Retriever, index_dir: Path, owners: set[str] | None):
        self.retriever, self.dir = retriever, index_dir
        wanted = sorted(owners) if owners is not None else None
        self._chunks: dict[str, dict[int, tuple[str, int, str]]] = defaultdict(dict)
        self._source: dict[str, Path] = {}  # owner -> the chunk table that holds it (its shard)
        for path in chunk_files(index_dir):
            if wanted is not None and (not wanted or not _may_hold(path, wanted)):
                continue
            table = pq.read_table(path, filters=[("owner", "in", wanted)] if wanted is not None else None)
            cols = [table.column(n).to_pylist() for n in ("owner", "row", "doc_id", "chunk_id", "text")]
            for owner, row, doc_id, chunk_id, text in zip(*cols):
                self._chunks[owner][row] = (doc_id, chunk_id, text)
                self._source[owner] = path
        self._indexes: dict[str, Any] = {}
        self._packs: dict[Path, tuple[pa.Table, dict[str, int]]] = {}

    def has_owner(self, owner: str) -> bool:
        return bool(self._chunks.get(owner))

    def search(self, owner: str, query: str, k: int) -> list[Passage]:
        chunks = self._chunks.get(owner, {})
        if k <= 0 or not chunks:
            return []
        if owner not in self._indexes:
            self._indexes[owner] = self._load(owner)
        hits = self.retriever.search_owner(self._indexes[owner], query, min(k, len(chunks)))
        return [Passage(*chunks[r], float(s)) for r, s in hits if r in chunks]

    def _load(self, owner: str) -> Any:
        if not self.retriever.packed:
            return self.retriever.load_owner(self.dir / OWNERS_DIR / owner_slug(owner))
        source = self._source[owner]
        if source not in self._packs:
            pack = pq.read_table(pack_of(source))
            self._packs[source] = (pack, {o: i for i, o in enumerate(pack.column("owner").to_pylist())})
        pack, rows = self._packs[source]
        return self.retriever.unpack_owner(pack, rows[owner])
