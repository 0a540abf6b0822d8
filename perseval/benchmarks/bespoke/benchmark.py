"""The registered Bespoke benchmark: build instances from a release (or the project's sample).

Its judges (perseval/benchmarks/bespoke/judges/) give the metrics per instance (section 3.4 and 4 of the
paper): `recall`, the share of gold claims a response states (0..100), from bespoke.recall; the four
personalization criteria rated 1..5 by E_p and reported x20 on 0..100, and `personalization`, their mean,
from bespoke.criteria. The headline `avg` is Table 4's "Avg.": the mean of the four criteria and recall,
per response with all five scored (Table 4 averages column means; docs/bespoke-protocol.md says when they differ).

Two more registered benchmarks read the same release for the paper's other experiments:
`bespoke-meta` (Table 3, meta_benchmark.py) and `bespoke-history` (Table 5, history_benchmark.py).
"""
from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path
from statistics import mean
from typing import Any, Sequence

import pandas as pd
import pyarrow.parquet as pq

from perseval.benchmarks.base import AnalysisInputs, Benchmark, BenchmarkData

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.records import BespokeQuery, BespokeRelease
from perseval.benchmarks.bespoke.respond import answer_messages, raw_context
from perseval.benchmarks.bespoke.sample import QUERIES_PER_USER, write_sample
from perseval.core import files
from perseval.core.errors import InputError
from perseval.kernel.params import Params
from perseval.core.instances import CORPUS_OWNER, Document, Instance, InstanceScore, Passage
from perseval.kernel.registry import register_benchmark
from perseval.benchmarks.bespoke.views import BespokeGold, BespokePayload
from perseval.benchmarks.probes import KnownItem

AVG_PARTS = (*CRITERIA, "recall")  # Table 4's Avg. is the mean of these five columns


class BespokeParams(Params):
    corpus: bool = True  # build the local search corpus (documents of owner CORPUS_OWNER)
    corpus_page_summaries: bool = True  # every user's visited-page summaries go into the corpus
    corpus_path: str | None = None  # your own collection: a Parquet file with columns id, text


class BespokeFormat(RequestFormat):
    """For generic agents: the question with retrieved history passages; the answer is free text."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        sessions = [Document(instance.user_id, p.doc_id, p.text) for p in passages]
        context, _ = raw_context(sessions, passage_chars * max(len(sessions), 1))
        return Prompt(answer_messages(instance.query, [], context, search_chars=None))

    def extract(self, instance: Instance, text: str) -> Answer:
        return Answer(None, "" if text.strip() else "empty answer")


@register_benchmark("bespoke")
class BespokeBenchmark(Benchmark[BespokeParams]):
    Payload, Gold = BespokePayload, BespokeGold
    headline_metric = "avg"
    group_label = "user"
    llm_judges = ("bespoke.recall", "bespoke.criteria")
    request_format = BespokeFormat()
    combined_metrics = ("avg",)
    probed_items = ("claim",)

    @classmethod
    def known_items(cls, instance: Instance) -> list[KnownItem]:
        return [(f"claim-{k}", c, c) for k, c in enumerate(BespokeGold.of(instance).claims)]

    @classmethod
    def wrong_user_fails(cls, item_id: str, value: str, theirs: dict[str, tuple[str, str]]) -> bool:
        return True  # another query's claims answer none of this query's

    @classmethod
    def read_source(cls, source: Path, params: BespokeParams) -> None:
        load_release(source)
        if params.corpus and params.corpus_path:
            _corpus_file(Path(params.corpus_path))

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        release, origin = read_release(sample, seed, source)
        chosen = select_queries(release.queries, sample, seed)
        instances = [inst for q in chosen for inst in self.instances(q)]
        documents = history_documents(release, {q.user for q in chosen})
        if self.params.corpus:
            documents += self._corpus(release, source)
        return BenchmarkData(instances, documents, _info(release, chosen, documents, origin))

    def instances(self, q: BespokeQuery) -> list[Instance]:
        """The instances one query gives (one here; one per meta-test pair in bespoke-meta)."""
        return [to_instance(q)]

    def _corpus(self, release: BespokeRelease, source: Path | None) -> list[Document]:
        docs = [Document(CORPUS_OWNER, p.doc_id, p.text, meta={"source": "corpus"}) for p in release.corpus]
        if self.params.corpus_page_summaries:
            docs += page_summary_documents(release)
        if self.params.corpus_path:
            docs += _corpus_file(Path(self.params.corpus_path))
        return docs

    def combine(self, scores: list[InstanceScore]) -> list[InstanceScore]:
        """`avg` per output: the mean of the four criteria (x20) and recall, when all five are scored."""
        by_output: dict[tuple[str, str, int, str, int], dict[str, InstanceScore]] = {}
        for s in scores:
            by_output.setdefault((s.instance_id, s.agent, s.repeat, s.judge, s.judge_repeat), {})[s.metric] = s
        out = []
        for metrics in by_output.values():
            if not all(m in metrics for m in AVG_PARTS):
                continue  # a judge binding without recall or criteria has no Avg.
            parts = [metrics[m].value for m in AVG_PARTS]
            first = metrics["recall"]
            value = mean(parts) if all(v is not None for v in parts) else None  # type: ignore[arg-type]
            out.append(InstanceScore(first.instance_id, first.agent, first.repeat, first.judge, first.judge_repeat,
                                     first.group, "avg", value, len(AVG_PARTS),
                                     sum(v is None for v in parts)))
        return out

    def stats(self, instances: list[Instance], documents: Any) -> dict[str, pd.DataFrame]:
        from perseval.benchmarks.bespoke.stats import dataset_tables

        return dataset_tables(instances, list(documents))

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        from perseval.benchmarks.bespoke.analysis import response_analysis

        return response_analysis(inputs, self.stats(inputs.instances, inputs.documents()))


# --- building blocks shared by the three Bespoke benchmarks --------------------------------------------

def read_release(sample: int, seed: int, source: Path | None) -> tuple[BespokeRelease, str]:
    """The release at `source`, or the project's seeded sample written to a temporary folder and read back
    through the same loader."""
    if source is not None:
        return load_release(source), str(source)
    with tempfile.TemporaryDirectory(prefix="bespoke-sample-") as tmp:
        write_sample(tmp, users=math.ceil(sample / QUERIES_PER_USER), seed=seed)
        return load_release(tmp), "sample"


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
        "task_type": q.task_type,
        "query_id": q.query_id,
    }
    return Instance(f"bespoke-{q.user}-{q.query_id}", "bespoke", q.user, q.user, q.query, {}, gold)


def history_documents(release: BespokeRelease, users: set[str]) -> list[Document]:
    return [Document(s.user, s.session_id, s.text, meta=dict(s.meta)) for s in release.sessions if s.user in users]


def page_summary_documents(release: BespokeRelease) -> list[Document]:
    """One corpus passage per distinct visited page (title and summary) in any user's search history."""
    seen: set[str] = set()
    docs = []
    for s in release.sessions:
        for k, visit in enumerate(s.meta.get("visits", [])):
            text = ". ".join(x for x in (visit["title"], visit["summary"]) if x).strip()
            if visit["summary"] and text not in seen:
                seen.add(text)
                docs.append(Document(CORPUS_OWNER, f"page-{s.session_id}-{k}", text, meta={"source": "page_summary"}))
    return docs


def _corpus_file(path: Path) -> list[Document]:
    problem = files.path_problem(path)
    if problem is not None:
        raise InputError(path, f"corpus_path: {'file missing' if problem == 'missing' else problem} (expected a "
                               "Parquet file with columns id, text)")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt or non-Parquet file
        raise InputError(path, f"corpus_path: cannot be read as Parquet: {exc}") from None
    for col in ("id", "text"):
        if col not in table.column_names:
            raise InputError(path, f"missing column (found {table.column_names})", field=col)
    docs = []
    for i, row in enumerate(table.select(["id", "text"]).to_pylist()):
        if not isinstance(row["text"], str) or not row["text"].strip():
            raise InputError(path, "expected non-empty text", row=i, field="text")
        docs.append(Document(CORPUS_OWNER, f"user-corpus-{row['id']}", row["text"], meta={"source": "corpus_path"}))
    return docs


def _info(release: BespokeRelease, chosen: list[BespokeQuery], docs: list[Document], origin: str) -> dict[str, Any]:
    sources = [d.meta.get("source") for d in docs]
    return {
        "source": origin,
        "users": len({q.user for q in chosen}),
        "queries": len(chosen),
        "queries_in_release": len(release.queries),
        "chat_sessions": sources.count("chat"),
        "search_sessions": sources.count("search"),
        "corpus_passages": sum(d.owner == CORPUS_OWNER for d in docs),
        "claims_per_query": round(mean(len(q.claims) for q in chosen), 2) if chosen else 0,
        "shots_per_query": round(mean(len(q.shots) for q in chosen), 2) if chosen else 0,
    }
