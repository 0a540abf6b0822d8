"""apeb.pps: a non-LLM personalized product search baseline, the stand-in for UniSAR.

The paper compares the LLM agents with UniSAR, a trained model of joint search and recommendation; its
weights and training data are not available here, so this baseline keeps UniSAR's two signals without
the training:
  relevance  BM25 (bm25s) of the query against each candidate's text (title, brand, category, attributes)
  affinity   how close each candidate is to the user's history: the mean score of the top `history_k`
             history passages the experiment's retriever (dense or BM25) returns for the candidate's text
Each signal is min-max normalised over the candidates and fused: alpha * relevance + (1 - alpha) *
affinity. Ties keep the candidate order. The trace keeps every candidate's scores.
"""
from __future__ import annotations

import logging

import bm25s
import numpy as np
from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.answers import ranking_output
from perseval.kernel.capabilities import Capability
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent
from perseval.benchmarks.views import RankingPayload


# bm25s logs every index it builds at DEBUG; one small index per instance would flood a run's log
logging.getLogger("bm25s").setLevel(logging.INFO)


class PpsParams(Params):
    alpha: float = Field(0.5, ge=0, le=1)  # weight of query relevance; the rest goes to history affinity
    history_k: int = Field(10, ge=1)
    stopwords: str | None = "en"


def card_text(card: dict) -> str:
    parts = [card.get("title", ""), card.get("brand", ""), str(card.get("category", "")).replace("_", " "),
             *(card.get("attributes") or [])]
    return " ".join(str(p).replace("-", " ") for p in parts if p)


def minmax(values: np.ndarray) -> np.ndarray:
    span = float(values.max() - values.min()) if len(values) else 0.0
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


def relevance(query: str, texts: list[str], stopwords: str | None) -> np.ndarray:
    """BM25 of `query` against each text (all zeros when no query term occurs)."""
    tokens = bm25s.tokenize(texts, stopwords=stopwords, show_progress=False, return_ids=False)
    query_tokens = bm25s.tokenize([query], stopwords=stopwords, show_progress=False, return_ids=False)[0]
    if not query_tokens or not any(tokens):
        return np.zeros(len(texts))
    model = bm25s.BM25()
    model.index(tokens, show_progress=False)
    return np.asarray(model.get_scores(query_tokens), dtype=float)


@register_agent("apeb.pps")
class APeBPersonalizedSearch(Agent[PpsParams]):
    benchmarks = ("apeb",)
    needs = frozenset({Capability.RETRIEVE})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.retrieve is not None
        p = self.params
        cards = RankingPayload.of(instance).candidates
        texts = [card_text(c) for c in cards]
        rel = relevance(instance.query, texts, p.stopwords)
        aff = np.zeros(len(cards))
        for i, text in enumerate(texts):
            hits = await ctx.retrieve(instance.user_id, text, p.history_k)
            aff[i] = float(np.mean([h.score for h in hits])) if hits else 0.0
        fused = p.alpha * minmax(rel) + (1 - p.alpha) * minmax(aff)
        order = sorted(range(len(cards)), key=lambda i: -fused[i])  # stable: ties keep the candidate order
        # a list in rank order (a dict would be stored with sorted keys)
        scores = [{"id": cards[i]["id"], "relevance": round(float(rel[i]), 4), "affinity": round(float(aff[i]), 4),
                   "fused": round(float(fused[i]), 4)} for i in order]
        return ranking_output(instance, name, repeat, [cards[i]["id"] for i in order],
                              trace=[{"step": "score", "alpha": p.alpha, "scores": scores}])
