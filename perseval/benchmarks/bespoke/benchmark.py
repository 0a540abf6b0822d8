"""The registered Bespoke benchmark: build instances from a release (or the project's sample).

Its judges (perseval/benchmarks/bespoke/judges/) give the metrics per instance
(section 3.4 and 4 of the paper): `recall`, the share of gold claims a response
states (0..100), from bespoke.recall; the four personalization criteria rated
1..5 by E_p and reported x20 on 0..100, and `personalization`, their mean (the
headline), from bespoke.criteria.
"""
from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path
from statistics import mean
from typing import Any, Sequence

from perseval.benchmarks.base import Answer, Benchmark, BenchmarkData, Prompt, TaskFormat
from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.prompts import answer_messages
from perseval.benchmarks.bespoke.records import BespokeQuery, BespokeRelease
from perseval.benchmarks.bespoke.sample import QUERIES_PER_USER, write_sample
from perseval.params import Params
from perseval.records import CORPUS_OWNER, Document, Instance, Passage
from perseval.registry import register_benchmark


class BespokeParams(Params):
    corpus: bool = True  # include corpus/corpus.parquet passages (owner CORPUS_OWNER) when the folder has one


class BespokeTask(TaskFormat):
    """For generic agents: the question with retrieved history passages; the answer is free text."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        sessions = [Document(instance.user_id, p.doc_id, p.text[:passage_chars]) for p in passages]
        return Prompt(answer_messages(instance.query, [], sessions, search_chars=0,
                                      history_chars=passage_chars * max(len(sessions), 1)))

    def extract(self, instance: Instance, text: str) -> Answer:
        return Answer(None, "" if text.strip() else "empty answer")


@register_benchmark("bespoke")
class BespokeBenchmark(Benchmark):
    Params = BespokeParams
    params: BespokeParams
    headline_metric = "personalization"
    group_label = "user"
    llm_judges = ("bespoke.recall", "bespoke.criteria")
    task_format = BespokeTask()

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        if source is None:
            # the generated sample goes through the same loader as a real release
            with tempfile.TemporaryDirectory(prefix="bespoke-sample-") as tmp:
                write_sample(tmp, users=math.ceil(sample / QUERIES_PER_USER), seed=seed)
                release, origin = load_release(tmp), "sample"
        else:
            release, origin = load_release(source), str(source)
        chosen = select_queries(release.queries, sample, seed)
        instances = [to_instance(q) for q in chosen]
        documents = self._documents(release, {q.user for q in chosen})
        return BenchmarkData(instances, documents, _info(release, chosen, documents, origin))

    def _documents(self, release: BespokeRelease, users: set[str]) -> list[Document]:
        docs = [Document(s.user, s.session_id, s.text, meta={"source": s.source})
                for s in release.sessions if s.user in users]
        if self.params.corpus:
            docs += [Document(CORPUS_OWNER, p.doc_id, p.text, meta={"source": "corpus"}) for p in release.corpus]
        return docs


def select_queries(queries: list[BespokeQuery], sample: int, seed: int) -> list[BespokeQuery]:
    """A seeded subset of `sample` queries, in release order (all of them when there are fewer)."""
    if sample >= len(queries):
        return list(queries)
    keep = sorted(random.Random(seed).sample(range(len(queries)), sample))
    return [queries[i] for i in keep]


def to_instance(q: BespokeQuery) -> Instance:
    """The agent sees only the query; need, claims, rubric and rated examples are hidden gold."""
    gold = {
        "need": q.need,
        "claims": list(q.claims),
        "rubric": q.rubric,
        "shots": [s.to_json() for s in q.shots],
        "meta_test": [s.to_json() for s in q.meta_test],  # held-out R-J pairs for meta-evaluation (4.1)
    }
    return Instance(f"bespoke-{q.user}-{q.query_id}", "bespoke", q.user, q.user, q.query, {}, gold)


def _info(release: BespokeRelease, chosen: list[BespokeQuery], docs: list[Document], origin: str) -> dict[str, Any]:
    sources = [d.meta["source"] for d in docs]
    return {
        "source": origin,
        "users": len({q.user for q in chosen}),
        "queries": len(chosen),
        "queries_in_release": len(release.queries),
        "chat_sessions": sources.count("chat"),
        "search_sessions": sources.count("search"),
        "corpus_passages": sources.count("corpus"),
        "claims_per_query": round(mean(len(q.claims) for q in chosen), 2) if chosen else 0,
        "shots_per_query": round(mean(len(q.shots) for q in chosen), 2) if chosen else 0,
    }
