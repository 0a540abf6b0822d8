"""Sparse retrieval: BM25 per owner through bm25s (a kept library), for the retriever swap (IBA Table 10)
and a sparse Bespoke corpus search. Chunk sizes are counted in words."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import bm25s

from perseval.kernel.params import Params
from perseval.kernel.registry import register_retriever
from perseval.retrieval.base import Retriever

_WORD = re.compile(r"\S+")


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


@register_retriever("bm25")
class BM25Retriever(Retriever[BM25Params]):

    def tokenizer(self) -> WordTokenizer:
        return WordTokenizer()

    def _tokens(self, texts: list[str]) -> Any:
        return bm25s.tokenize(texts, stopwords=self.params.stopwords, show_progress=False, return_ids=False)

    def index_owner(self, texts: list[str], path: Path) -> None:
        model = bm25s.BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)
        model.index(self._tokens(texts), show_progress=False)
        model.save(str(path), show_progress=False)

    def load_owner(self, path: Path) -> Any:
        return bm25s.BM25.load(str(path), show_progress=False)

    def search_owner(self, index: Any, query: str, k: int) -> list[tuple[int, float]]:
        tokens = self._tokens([query])
        if not tokens[0]:  # a query of stop words only matches nothing
            return []
        docs, scores = index.retrieve(tokens, k=min(k, index.scores["num_docs"]), show_progress=False)
        return [(int(d), float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]
