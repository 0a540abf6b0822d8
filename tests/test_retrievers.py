"""Registered retrievers on real indexes: dense (FlagEmbedding MiniLM + FAISS) and sparse (BM25 via bm25s),
sharing one chunk table and one search path; a shard loads only its owners."""
from __future__ import annotations

import pytest

from perseval.experiment.components import make_retriever
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import load_config
from perseval.core.instances import Document
from perseval.kernel.registry import retriever_class

from .conftest import CONFIGS

DOCS = [Document("u1", "a", "I always book a window seat on trains"),
        Document("u1", "b", "the weather was grey and cold"),
        Document("u1", "c", "please write the report in the first person plural"),
        Document("u2", "d", "my cat likes the window seat too"),
        Document("u2", "e", " ".join(f"word{i}" for i in range(40)))]


@pytest.mark.parametrize("name", ["bm25", "minilm"])
def test_each_retriever_finds_the_relevant_turn_of_one_owner(tmp_path, name):
    retriever = make_retriever(load_config(RetrieverConfig, CONFIGS / "retrievers" / f"{name}.yaml"))
    counts = retriever.build(DOCS, tmp_path)
    assert counts["owners"] == 2 and counts["documents"] == 5 and counts["chunks"] >= 5
    index = retriever.open(tmp_path)
    hits = index.search("u1", "which seat on the train?", 2)
    assert hits and hits[0].doc_id == "a" and all(h.doc_id in {"a", "b", "c"} for h in hits)
    assert index.search("u3", "anything", 3) == [] and index.search("u1", "seat", 0) == []
    only_u2 = retriever.open(tmp_path, owners={"u2"})
    assert only_u2.search("u1", "seat", 3) == [] and only_u2.search("u2", "window seat", 1)[0].doc_id == "d"


def test_bm25_chunks_in_words_with_overlap(tmp_path):
    cfg = RetrieverConfig(name="b", kind="bm25", chunking={"size": 16, "overlap": 4})
    make_retriever(cfg).build(DOCS[4:], tmp_path)
    import pyarrow.parquet as pq

    chunks = pq.read_table(tmp_path / "chunks.parquet").to_pylist()
    assert [len(c["text"].split()) for c in chunks] == [16, 16, 16]  # 40 words: 0-16, 12-28, 24-40
    assert chunks[1]["text"].split()[0] == "word12" and [c["row"] for c in chunks] == [0, 1, 2]


def test_retriever_kinds_are_registered_with_params_models():
    assert retriever_class("bm25").Params.model_fields.keys() >= {"k1", "b"}
    assert "embedder" in retriever_class("dense").Params.model_fields


def test_dense_owners_indexed_in_groups_search_as_if_indexed_one_by_one(tmp_path, monkeypatch):
    """The index stage encodes groups of owners in one call; each owner's index holds exactly its own rows."""
    import numpy as np

    import perseval.retrieval.base as base
    from perseval.retrieval.dense import _faiss

    retriever = make_retriever(load_config(RetrieverConfig, CONFIGS / "retrievers" / "minilm.yaml"))
    docs = DOCS + [Document("u3", "f", "trains are late on sundays"), Document("u3", "g", "a window seat")]
    monkeypatch.setattr(base, "INDEX_BATCH_CHUNKS", 4)  # u1 (3 chunks) alone would not flush: groups of 2 owners
    calls: list[int] = []
    encode = retriever.embedder.encode_passages
    monkeypatch.setattr(retriever.embedder, "encode_passages", lambda texts: calls.append(len(texts)) or encode(texts))
    retriever.build(docs, tmp_path / "grouped")
    assert len(calls) < 3  # fewer encode calls than owners
    for owner, texts in (("u1", [d.text for d in DOCS[:3]]), ("u3", ["trains are late on sundays", "a window seat"])):
        index = _faiss().read_index(str(tmp_path / "grouped" / base.OWNERS_DIR / base.owner_slug(owner)))
        stored = index.reconstruct_n(0, index.ntotal)
        assert index.ntotal == len(texts) and np.allclose(stored, encode(texts), atol=1e-5)
    hits = retriever.open(tmp_path / "grouped").search("u3", "which seat?", 1)
    assert hits[0].doc_id == "g"
