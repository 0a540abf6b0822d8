"""A tiny outside plugin: one benchmark, one agent, one judge and one retriever, registered from outside
perseval (no file under perseval/, tasks/ or flows/). It needs no model, so a test can run it end to end.

Benchmark `tiny`: each user once said which colour they like, among unrelated turns; the task asks for it.
Agent `tiny.lookup`: retrieves the best passage for the task and answers the colour word it finds.
Judge `tiny.exact`: 1 when the answer names the gold colour. Retriever `tiny.overlap`: word overlap.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from pydantic import Field

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.base import Benchmark, BenchmarkData
from perseval.judges.base import Judge, JudgeBinding
from perseval.kernel.params import Params
from perseval.core.instances import AgentOutput, Document, Instance, InstanceScore, Judgment
from perseval.kernel.registry import register_agent, register_benchmark, register_judge, register_retriever
from perseval.retrieval.base import Retriever
from perseval.retrieval.bm25 import WordTokenizer

COLOURS = ["red", "green", "blue", "yellow"]
NOISE = ["the train was late", "I bought bread", "meeting moved to noon", "rain again today"]


class TinyParams(Params):
    noise: int = Field(3, ge=0)


@register_benchmark("tiny")
class TinyBenchmark(Benchmark):
    Params = TinyParams
    headline_metric = "accuracy"
    rule_judges = ("tiny.exact",)

    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        rng = random.Random(seed)
        instances, documents = [], []
        for i in range(sample):
            user, colour = f"u{i}", rng.choice(COLOURS)
            turns = [*rng.sample(NOISE, min(self.params.noise, len(NOISE))), f"my favourite colour is {colour}"]
            rng.shuffle(turns)
            documents += [Document(user, f"{user}-t{j}", t, f"2025-01-0{j + 1}") for j, t in enumerate(turns)]
            instances.append(Instance(f"tiny-{i}", "tiny", user, "all", "which favourite colour?", {}, {"colour": colour}))
        return BenchmarkData(instances, documents, {"users": sample})


@register_agent("tiny.lookup")
class LookupAgent(Agent):
    benchmarks = ("tiny",)
    needs = frozenset({"retrieve"})

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        assert ctx.retrieve is not None and ctx.llm is None  # only what it asked for
        passages = await ctx.retrieve(instance.user_id, instance.query, 1)
        words = re.findall(r"\w+", passages[0].text) if passages else []
        answer = next((w for w in words if w in COLOURS), "")
        return AgentOutput(instance.instance_id, name, repeat, answer)


@register_judge("tiny.exact")
class ExactJudge(Judge):
    benchmark = "tiny"
    item = "answer"
    metrics = ("accuracy",)
    uses_llm = False

    async def judge(self, instance: Instance, output: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        hit = float(output.text.strip() == instance.gold["colour"])
        return [self.judgment(instance, output, binding, "colour", hit, raw=output.text)]

    def score(self, instance: Instance, output: AgentOutput, judgments: list[Judgment]) -> list[InstanceScore]:
        value = 100.0 * judgments[0].score if judgments and judgments[0].score is not None else None
        return [self.instance_score(instance, output, judgments, "accuracy", value, len(judgments), 0)]


class OverlapParams(Params):
    lowercase: bool = True


@register_retriever("tiny.overlap")
class OverlapRetriever(Retriever):
    Params = OverlapParams

    def tokenizer(self) -> WordTokenizer:
        return WordTokenizer()

    def _words(self, text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower() if self.params.lowercase else text))

    def index_owner(self, texts: list[str], path: Path) -> None:
        path.write_text(json.dumps(texts))

    def load_owner(self, path: Path) -> Any:
        return json.loads(path.read_text())

    def search_owner(self, index: Any, query: str, k: int) -> list[tuple[int, float]]:
        q = self._words(query)
        scored = sorted(((len(q & self._words(t)), -r) for r, t in enumerate(index)), reverse=True)[:k]
        return [(-neg, float(s)) for s, neg in scored]
