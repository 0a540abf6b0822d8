"""Sparse retrieval: BM25 per owner through bm25s (a kept library), for the retriever swap (IBA Table 10)
and a sparse Bespoke corpus search. Chunk sizes are counted in words.

A packed kind (perseval.retrieval.base): the BM25 index of one owner's profile is a few kB, so an index shard
keeps every owner's in one table (bm25s's score matrix in CSC form and its vocabulary, one row per owner)
instead of bm25s's five files per owner."""
from __future__ import annotations

import functools
import re
from itertools import chain
from typing import Any, Literal

import bm25s
import pandas as pd
from bm25s.tokenization import _infer_stopwords
from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer  # bm25s's own BM25 variants
import numpy as np
import pyarrow as pa

from perseval.kernel.params import Params
from perseval.kernel.registry import register_retriever
from perseval.retrieval.base import Retriever

_WORD = re.compile(r"\S+")
_BM25S_WORD = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's default token_pattern
_ARRAYS = ("data", "indices", "indptr")  # bm25s's score matrix (documents x vocabulary), CSC
DELTA = 0.5  # bm25s.BM25's default delta (BM25L, BM25+), which perseval never changed


class WordTokenizer:
    """Whitespace words: encode gives word positions, decode joins words back (chunking only)."""

    def __init__(self) -> None:
        self._words: list[str] = []

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        self._words = _WORD.findall(text)
        return list(range(len(self._words)))

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(self._words[i] for i in ids)


class BM25Params(Params):
    k1: float = 1.5
    b: float = 0.75
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stopwords: str | None = "en"  # a bm25s stop-word language, or None


def _lists(arrays: list[np.ndarray]) -> pa.ListArray:
    """Numpy arrays of one dtype as one Arrow list column (no per-element Python objects)."""
    offsets = np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.concatenate(arrays)))


@register_retriever("bm25")
class BM25Retriever(Retriever[BM25Params]):
    packed = True
    layout = 2  # 2: packed owners (1: bm25s's own files per owner)

    def tokenizer(self) -> WordTokenizer:
        return WordTokenizer()

    def _model(self) -> bm25s.BM25:
        return bm25s.BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)

    def pack_owners(self, batch: list[list[str]]) -> pa.Table:
        """Every owner's bm25s index, built with numpy over the whole batch: the same arrays bm25s.BM25.index
        makes (tests/test_retrievers.py checks them bit for bit), without its Python loop per document and
        token (5 ms per 40-item profile; 20,000 profiles were most of the index stage)."""
        flat, lengths, words = self._token_ids([t for texts in batch for t in texts])
        starts = np.concatenate([[0], np.cumsum(lengths)])
        owners, first = [], 0
        for texts in batch:
            docs = slice(first, first + len(texts))
            owners.append(self._owner_index(flat[starts[docs.start]:starts[docs.stop]], lengths[docs], words))
            first = docs.stop
        columns = {name: _lists([o[name] for o in owners]) for name in _ARRAYS}
        nonoccurrence = [o["nonoccurrence"] for o in owners]
        return pa.table({**columns, "num_docs": pa.array([o["num_docs"] for o in owners], pa.int64()),
                         "vocab": pa.array([o["vocab"] for o in owners], pa.list_(pa.string())),
                         "nonoccurrence": _lists(nonoccurrence) if nonoccurrence[0] is not None else
                         pa.nulls(len(owners), pa.list_(pa.float32()))})

    def _token_ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """bm25s.tokenize's tokens of every text at once (lower case, its word pattern, its stop words), as
        (token ids of all texts in order, tokens per text, the word of each id): its loop per token made
        half of the index stage."""
        found = [_BM25S_WORD.findall(t.lower()) for t in texts]
        codes, words = pd.factorize(pd.Series(list(chain.from_iterable(found)), dtype=object), sort=False)
        keep = ~np.fromiter((w in self._stop for w in words), dtype=bool, count=len(words))[codes]
        text_of = np.repeat(np.arange(len(texts)), [len(f) for f in found])
        lengths = np.bincount(text_of[keep], minlength=len(texts)).astype(np.int64)
        return codes[keep].astype(np.int64), lengths, np.asarray(words, dtype=object)

    def _owner_index(self, ids: np.ndarray, lengths: np.ndarray, words: np.ndarray) -> dict[str, Any]:
        """One owner's index from its documents' token ids (`ids`, documents' lengths `lengths`), as
        bm25s.BM25.build_index_from_ids computes it: the term-frequency part through bm25s's own scorer on
        arrays (same dtypes, so the same float32 scores), the idf through its own function per distinct df."""
        p, n_docs = self.params, len(lengths)
        vocab, local = np.unique(ids, return_inverse=True)  # the owner's words; bm25s numbers them otherwise,
        doc = np.repeat(np.arange(n_docs), lengths)         # which changes no score (a column per word)
        pairs, tf = np.unique(doc * len(vocab) + local, return_counts=True)  # (document, word) -> count
        pair_doc, pair_word = pairs // max(len(vocab), 1), pairs % max(len(vocab), 1)
        df = np.bincount(pair_word, minlength=len(vocab))
        avg = np.array(lengths).mean() if n_docs else np.float64(0)  # bm25s: np.array(lengths).mean()
        idf_of = _select_idf_scorer(p.method)
        idf = np.array([idf_of(int(d), N=n_docs) for d in df], dtype="float32")
        tfc = _select_tfc_scorer(p.method)(tf_array=tf.astype("float32"), l_d=lengths[pair_doc], l_avg=avg,
                                           k1=p.k1, b=p.b, delta=DELTA)
        scores = idf[pair_word] * tfc
        nonoccurrence = None
        if p.method in ("bm25l", "bm25+"):  # bm25s subtracts what a word absent from a document would score
            zero = _select_tfc_scorer(p.method)(tf_array=0, l_d=avg, l_avg=avg, k1=p.k1, b=p.b, delta=DELTA)
            nonoccurrence = np.array([idf_of(int(d), N=n_docs) * zero for d in df], dtype="float32")
            scores = scores - nonoccurrence[pair_word]
        order = np.argsort(pair_word * max(n_docs, 1) + pair_doc, kind="stable")  # CSC: by word, then document
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return {"data": scores[order].astype("float32"), "indices": pair_doc[order].astype("int32"),
                "indptr": indptr, "num_docs": n_docs, "vocab": [*words[vocab], ""],  # bm25s adds "" last
                "nonoccurrence": nonoccurrence}

    def unpack_owner(self, pack: pa.Table, row: int) -> Any:
        """The owner's bm25s model as bm25s.BM25.load rebuilds a saved one."""
        model = self._model()
        model.vocab_dict = {token: i for i, token in enumerate(pack.column("vocab")[row].as_py())}
        model.unique_token_ids_set = set(model.vocab_dict.values())
        model.scores = {name: pack.column(name)[row].values.to_numpy() for name in _ARRAYS}
        model.scores["num_docs"] = pack.column("num_docs")[row].as_py()
        nonoccurrence = pack.column("nonoccurrence")[row]
        model.nonoccurrence_array = nonoccurrence.values.to_numpy() if nonoccurrence.is_valid else None
        return model

    def search_owner(self, index: Any, query: str, k: int) -> list[tuple[int, float]]:
        tokens = self._query_tokens(query)
        if not tokens or len(index.vocab_dict) <= 1:  # stop words only, in the query or the whole history
            return []
        # bm25s.BM25.retrieve's own two steps for one query (its scores, its top-k selection), without the
        # progress bar and mapping it sets up per call (a tenth of a run shard's CPU)
        scores = index.get_scores(tokens)
        top, docs = bm25s.selection.topk(scores, k=min(k, index.scores["num_docs"]), backend="auto", sorted=True)
        return [(int(d), float(s)) for d, s in zip(docs, top) if s > 0]

    def _query_tokens(self, query: str) -> list[str]:
        """bm25s.tokenize's tokens of one text (lower case, its word pattern, without its stop words)."""
        return [w for w in _BM25S_WORD.findall(query.lower()) if w not in self._stop]

    @functools.cached_property
    def _stop(self) -> frozenset[str]:
        return frozenset(_infer_stopwords(self.params.stopwords) if self.params.stopwords else ())
