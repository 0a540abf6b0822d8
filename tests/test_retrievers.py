"""Registered retrievers on real indexes: dense (FlagEmbedding MiniLM + FAISS) and sparse (BM25 via bm25s),
sharing one chunk table and one search path; a shard loads only its owners."""
from __future__ import annotations

import pytest

from perseval.experiment.components import make_retriever
from perseval.retrieval.settings import RetrieverConfig
from perseval.experiment.config import load_config
from perseval.core.instances import Document
from perseval.kernel.registry import retriever_class
from perseval.retrieval import base

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

    [table] = base.chunk_files(tmp_path)
    chunks = pq.read_table(table).to_pylist()
    assert [len(c["text"].split()) for c in chunks] == [16, 16, 16]  # 40 words: 0-16, 12-28, 24-40
    assert chunks[1]["text"].split()[0] == "word12" and [c["row"] for c in chunks] == [0, 1, 2]


def test_retriever_kinds_are_registered_with_params_models():
    assert retriever_class("bm25").Params.model_fields.keys() >= {"k1", "b"}
    assert "embedder" in retriever_class("dense").Params.model_fields


def test_dense_owners_indexed_in_groups_search_as_if_indexed_one_by_one(tmp_path, monkeypatch):
    """The index stage encodes groups of owners in one call; each owner's index holds exactly its own rows."""
    import numpy as np

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


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_packed_bm25_indexes_are_bm25s_own_bit_for_bit(method):
    """BM25 owners are built together with numpy and packed in one table per index shard: each owner's score
    matrix equals what bm25s.BM25.index makes of the same chunks, float for float, and searches alike."""
    import random

    import bm25s

    words = "window seat train report plural weather cold cat the of a is trains reports seats".split()
    rng = random.Random(method)
    batch = [[" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(rng.randint(1, 12))]
             for _ in range(25)]
    retriever = make_retriever(RetrieverConfig(name="b", kind="bm25", params={"method": method, "k1": 1.2, "b": 0.7}))
    pack = retriever.pack_owners(batch)
    for row, texts in enumerate(batch):
        ours, theirs = retriever.unpack_owner(pack, row), bm25s.BM25(k1=1.2, b=0.7, method=method)
        theirs.index(bm25s.tokenize(texts, stopwords="en", show_progress=False, return_ids=False), show_progress=False)
        assert _by_word(ours) == _by_word(theirs) and set(ours.vocab_dict) == set(theirs.vocab_dict)
        assert _by_word(ours, "nonoccurrence_array") == _by_word(theirs, "nonoccurrence_array")
        for query in ("window seat", "cold trains of the report", "Cat!", "the of"):
            tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
            docs, scores = theirs.retrieve(tokens, k=min(4, len(texts)), show_progress=False) if tokens[0] else \
                ([[]], [[]])
            assert retriever.search_owner(ours, query, 4) == [(int(d), float(s)) for d, s in zip(docs[0], scores[0])
                                                               if s > 0]


def _by_word(model, array: str = "scores") -> dict:
    """A bm25s model's scores (or non-occurrence array) by word and document, as bytes (ids are its own)."""
    word = {i: w for w, i in model.vocab_dict.items()}
    if array != "scores":
        values = getattr(model, array)
        return None if values is None else {word[i]: v.tobytes() for i, v in enumerate(values)}
    s = model.scores
    return {(word[col], int(s["indices"][j])): s["data"][j].tobytes()
            for col in range(len(s["indptr"]) - 1) for j in range(s["indptr"][col], s["indptr"][col + 1])}


def test_an_index_built_in_shards_searches_as_one_built_whole(tmp_path, monkeypatch):
    """Index shards cut the sorted owners by documents, never inside an owner; their chunk tables and BM25
    packs together answer every search as one index of everything does, and a searcher for a few owners
    opens only the shards that hold them."""
    import pyarrow.parquet as pq

    from perseval.core.store import StageStore
    from perseval.pipeline import stages

    docs = [Document(f"user{o:02d}", f"user{o:02d}#{k}", f"{'seat window train cold'.split()[k % 4]} note {o} {k}")
            for o in range(30) for k in range(1 + o % 5)]
    StageStore(tmp_path, "documents", "d").write_records(0, docs, Document)
    ranges = stages.owner_ranges(str(tmp_path), "d", per_shard=20)
    assert len(ranges) == 5 and ranges[0][0] is None and ranges[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, disjoint
    retriever = make_retriever(RetrieverConfig(name="b", kind="bm25"))
    for shard, between in enumerate(ranges):
        retriever.build(stages.load_documents(str(tmp_path), "d", between=between), tmp_path / "sharded", shard)
    retriever.build(docs, tmp_path / "whole")
    tables = base.chunk_files(tmp_path / "sharded")
    held = [set(pq.read_table(t, columns=["owner"]).column("owner").to_pylist()) for t in tables]
    assert len(tables) == 5 and sum(map(len, held)) == 30 and set.union(*held) == {d.owner for d in docs}
    assert sum(base.shard_counts(t)["documents"] for t in tables) == len(docs)
    sharded, whole = retriever.open(tmp_path / "sharded"), retriever.open(tmp_path / "whole")
    for o in range(30):
        assert sharded.search(f"user{o:02d}", "window seat", 3) == whole.search(f"user{o:02d}", "window seat", 3)
    opened = []
    monkeypatch.setattr(pq, "read_table", lambda path, **kw: opened.append(path) or READ(path, **kw))
    few = retriever.open(tmp_path / "sharded", owners={"user00", "user01"})
    assert few.search("user01", "seat", 1) and opened == [tables[0], base.pack_of(tables[0])]


READ = __import__("pyarrow.parquet", fromlist=["read_table"]).read_table
