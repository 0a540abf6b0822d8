"""The registered Bespoke benchmark: build instances, judge responses, score them.

Metrics per instance (section 3.4 and 4 of the paper): `recall`, the share
of gold claims a response states (0..100); the four personalization
criteria rated 1..5 by E_p and reported x20 on 0..100; `personalization`,
their mean, the headline.
"""
from __future__ import annotations

import asyncio
import math
import random
import tempfile
from pathlib import Path
from statistics import mean
from typing import Any

from perseval.benchmarks.base import Benchmark, BenchmarkData, JudgeBinding
from perseval.benchmarks.bespoke import prompts as P
from perseval.benchmarks.bespoke.layout import CRITERIA
from perseval.benchmarks.bespoke.loader import load_release
from perseval.benchmarks.bespoke.records import BespokeQuery, BespokeRelease
from perseval.benchmarks.bespoke.sample import QUERIES_PER_USER, write_sample
from perseval.errors import ConfigError
from perseval.judges.binary import binary_verdict
from perseval.records import CORPUS_OWNER, AgentOutput, Document, Instance, InstanceScore, Judgment
from perseval.registry import register_benchmark

# Defaults sized for the embedded 4096-token judge; raise them for large-context judges.
DEFAULTS: dict[str, Any] = {
    "response_chars": 3000,  # response text shown to either judge
    "rubric_chars": 2000,
    "shot_chars": 500,  # each example response shown to E_p
    "max_shots": 3,
    "claim_max_tokens": 64,
    "criteria_max_tokens": 320,
    "corpus": True,  # include corpus/corpus.parquet passages (owner CORPUS_OWNER) when the folder has one
}
NO_RESPONSE = "agent produced no response"


@register_benchmark("bespoke")
class BespokeBenchmark(Benchmark):
    headline_metric = "personalization"
    group_label = "user"
    uses_llm_judge = True

    def __init__(self, params: dict[str, Any] | None = None):
        unknown = sorted(set(params or {}) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"bespoke: unknown params {unknown}; known: {sorted(DEFAULTS)}")
        super().__init__({**DEFAULTS, **(params or {})})

    # --- build -----------------------------------------------------------------------------

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
        if self.params["corpus"]:
            docs += [Document(CORPUS_OWNER, p.doc_id, p.text, meta={"source": "corpus"}) for p in release.corpus]
        return docs

    # --- judge -----------------------------------------------------------------------------

    async def judge(self, instance: Instance, output: AgentOutput, judge: JudgeBinding | None) -> list[Judgment]:
        if judge is None:
            raise ConfigError("bespoke needs an LLM judge: list one under `judges:` in the experiment file")
        if output.status != "ok" or not output.text.strip():
            return self._no_response(instance, output, judge)
        claims = [self._judge_claim(instance, output, judge, k, c) for k, c in enumerate(instance.gold["claims"])]
        results = await asyncio.gather(*claims, self._judge_criteria(instance, output, judge))
        return [*results[:-1], *results[-1]]

    def _no_response(self, instance: Instance, output: AgentOutput, judge: JudgeBinding) -> list[Judgment]:
        # A failed or empty output is the agent's failure, not the judge's: it conveys no gold claim
        # and satisfies no criterion, so it is scored at the floor (recall 0, every criterion 1)
        # rather than left unscored, which would drop it from the means and flatter a flaky agent.
        # No judge call is made; the judge name is kept so the rows join with the judged ones.
        claims = [_judgment(instance, output, judge, f"claim-{k}", "claim", 0.0, "scored", "", NO_RESPONSE)
                  for k in range(len(instance.gold["claims"]))]
        criteria = [_judgment(instance, output, judge, name, "criterion", 1.0, "scored", "", NO_RESPONSE)
                    for name in CRITERIA]
        return claims + criteria

    async def _judge_claim(self, instance: Instance, output: AgentOutput, judge: JudgeBinding,
                           k: int, claim: str) -> Judgment:
        messages = P.claim_messages(claim, output.text, self.params["response_chars"])
        v = await binary_verdict(judge, messages, max_tokens=self.params["claim_max_tokens"])
        return _judgment(instance, output, judge, f"claim-{k}", "claim", v.score, v.status, v.raw, v.feedback)

    async def _judge_criteria(self, instance: Instance, output: AgentOutput, judge: JudgeBinding) -> list[Judgment]:
        gold = instance.gold
        messages = P.criteria_messages(instance.query, gold["need"], gold["rubric"], gold["shots"], output.text,
                                       self.params)
        res = await judge.model.chat(messages, json_schema=P.CRITERIA_SCHEMA,
                                     max_tokens=self.params["criteria_max_tokens"], repeat=judge.repeat)
        if res.status != "ok":
            return [_judgment(instance, output, judge, name, "criterion", None, "failed", res.text, res.error)
                    for name in CRITERIA]
        parsed = P.parse_criteria(res.text)
        out = []
        for name in CRITERIA:
            score, feedback = parsed[name]
            status = "scored" if score is not None else "unscored"  # unparseable: kept as raw text, never 0
            out.append(_judgment(instance, output, judge, name, "criterion",
                                 None if score is None else float(score), status, res.text, feedback))
        return out

    # --- score -----------------------------------------------------------------------------

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        judge, judge_repeat = (judgments[0].judge, judgments[0].judge_repeat) if judgments else ("", 0)

        def metric(name: str, value: float | None, n_items: int, n_unscored: int) -> InstanceScore:
            return InstanceScore(instance.instance_id, output.agent, output.repeat, judge, judge_repeat,
                                 instance.group, name, value, n_items, n_unscored)

        scores, per_criterion = [], []
        for name in CRITERIA:
            items = [j for j in judgments if j.kind == "criterion" and j.item_id == name]
            values = _scored(items)
            value = 20.0 * mean(values) if values else None  # 1..5 Likert reported x20, as in the paper
            per_criterion.append(value)
            scores.append(metric(name, value, len(items), len(items) - len(values)))
        # mean of the criteria that could be scored; n_unscored says how many were not
        rated = [v for v in per_criterion if v is not None]
        scores.append(metric("personalization", mean(rated) if rated else None, len(CRITERIA),
                             len(CRITERIA) - len(rated)))
        claims = [j for j in judgments if j.kind == "claim"]
        verdicts = _scored(claims)  # an unscored claim is left out of the share, never counted absent
        scores.append(metric("recall", 100.0 * mean(verdicts) if verdicts else None, len(claims),
                             len(claims) - len(verdicts)))
        return scores


def _scored(items: list[Judgment]) -> list[float]:
    return [j.score for j in items if j.status == "scored" and j.score is not None]


def _judgment(instance: Instance, output: AgentOutput, judge: JudgeBinding, item_id: str, kind: str,
              score: float | None, status: str, raw: str, feedback: str) -> Judgment:
    return Judgment(instance.instance_id, output.agent, output.repeat, judge.name, judge.repeat, item_id, kind,
                    score, status, raw, feedback)  # type: ignore[arg-type]


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
