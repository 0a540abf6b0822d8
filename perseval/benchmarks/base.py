"""The contract every benchmark fulfils: build its data, say which judges score it, format its tasks.

A benchmark does not judge or score: judges (perseval.judges.base.Judge) do,
each registered for one benchmark and one kind of item. A benchmark names the
judge kinds that a bare judge model is bound to (`llm_judges`) and the rule
judges that always run (`rule_judges`); anything else (a trajectory rubric, a
meta-judge) is a judge module of its own that an experiment names.
"""
from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from collections import Counter
from typing import Any, AsyncIterator, Callable, ClassVar, Iterable, Mapping, Sequence

import pandas as pd

from perseval.core.errors import ConfigError, InputError
from perseval.llm.base import ChatModel
from perseval.kernel.params import Configurable, P, Params
from perseval.core.instances import AgentOutput, Document, Instance, InstanceScore
from perseval.benchmarks import probes
from perseval.benchmarks.views import GoldView, PayloadView, check_instance
from perseval.agents.contract import RequestFormat


@dataclass
class BenchmarkData:
    """What the construct/ingest stage produces: instances plus every user's history.

    A streamed build yields several of these: the writer concatenates their rows in order and merges
    their `info` (a later batch's keys win, so a last, row-less batch can carry the final counts).
    """

    instances: list[Instance]
    documents: list[Document]  # history items, and corpus passages (owner == CORPUS_OWNER)
    info: dict[str, Any] = field(default_factory=dict)  # counts and construction stats, logged to MLflow


@dataclass
class AnalysisInputs:
    """Everything a benchmark's cross-cell analysis may read; the large parts are loaded on demand.

    `outputs()`: one row per agent output of every distinct run (AgentOutput fields plus agent, backbone,
    retriever); `judgments()`: one row per judgment of every cell (Judgment fields plus the cell's identity
    columns, `judge` being the cell's judge name); `documents()`: the benchmark entry's history documents;
    `evidence()`: those tagged as evidence (meta `supports` or `dimension`), read without their text;
    `agents`: each agent's validated params, by agent name (typed: no need to read them back from the
    frame's `agent_params` text).
    """

    scores: pd.DataFrame
    instances: list[Instance]
    outputs: Callable[[], pd.DataFrame]
    judgments: Callable[[], pd.DataFrame]
    documents: Callable[[], list[Document]]
    agents: Mapping[str, Params] = field(default_factory=dict)
    evidence: Callable[[], list[Document]] = lambda: []  # the documents tagged as evidence, without their text


class Benchmark(Configurable[P], ABC):
    """One benchmark: `params` is the validated `params:` mapping of its entry in the experiment file."""

    name: ClassVar[str]  # set by @register_benchmark
    headline_metric: ClassVar[str]
    group_label: ClassVar[str] = "group"  # what `Instance.group` means here (domain, task type...)
    llm_judges: ClassVar[tuple[str, ...]] = ()  # judge kinds a judge YAML without `kind` is bound to
    rule_judges: ClassVar[tuple[str, ...]] = ()  # judge kinds that need no model, applied unless configured
    # LLM judge kinds a judge YAML without `kind` runs only when its params name them (`params: {<kind>: {}}`)
    optional_llm_judges: ClassVar[tuple[str, ...]] = ()
    request_format: ClassVar[RequestFormat | None] = None  # None: only this benchmark's own agents can run it
    combined_metrics: ClassVar[tuple[str, ...]] = ()  # metrics `combine` makes from several judges' metrics
    # typed views of an instance's payload and gold (perseval.benchmarks.views), checked before data is written
    Payload: ClassVar[type[PayloadView]] = PayloadView
    Gold: ClassVar[type[GoldView]] = GoldView
    # judge probes (perseval.benchmarks.probes): the judge items (Judge.item) whose verdict a probe can know,
    # and the kinds of answer it writes; none: its LLM judges are not probed
    probed_items: ClassVar[tuple[str, ...]] = ()
    probe_kinds: ClassVar[tuple[str, ...]] = (probes.GOOD, probes.EMPTY, probes.WRONG)

    # human labels the data itself carries (Bespoke's meta-test ratings): judge-check compares a cell's scores,
    # divided by human_scale, with them; none by default
    carries_human_labels: ClassVar[bool] = False
    human_scale: ClassVar[float] = 1.0

    @classmethod
    def human_scores(cls, instance: Instance) -> dict[str, float]:
        """Metric -> the human's score of this instance, where the data carries one."""
        return {}

    @classmethod
    def known_items(cls, instance: Instance) -> list[probes.KnownItem]:
        """(item id, statement, value) of the gold items whose verdict is known without a judge (IBA's
        checkpoints, Bespoke's claims): what probes state and a trace shows beside each verdict."""
        return []

    @classmethod
    def wrong_user_fails(cls, item_id: str, value: str, theirs: dict[str, tuple[str, str]]) -> bool:
        """Whether another user's items, stated as an answer, fail this item of this instance."""
        return probes.differs(item_id, value, theirs)

    @classmethod
    def probe_answers(cls, instances: list[Instance], n: int, seed: int) -> tuple[list[AgentOutput], probes.Labels]:
        """Answers of known verdict for n seeded instances and (probe agent, instance, item) -> right verdict."""
        return probes.known_item_probes(cls.known_items, cls.wrong_user_fails, instances, n, seed)

    @classmethod
    def check_instances(cls, instances: Iterable[Instance], where: str) -> None:
        """InputError (naming `where`, the instance and the key) at the first instance whose payload or gold
        does not fit this benchmark's views."""
        for inst in instances:
            check_instance(inst, cls.Payload, cls.Gold, where)

    @abstractmethod
    def build(self, *, sample: int, seed: int, source: Path | None) -> BenchmarkData:
        """Construct (seeded) or ingest (from `source`) the instances and histories, in memory.

        Must raise perseval.core.errors.InputError naming file, row and field on bad input.
        """

    async def batches(self, *, sample: int, seed: int, source: Path | None,
                      models: Mapping[str, ChatModel] | None = None) -> AsyncIterator[BenchmarkData]:
        """The build as a stream of batches, for the construct stage's one writer. Default: one batch.

        `models` holds the construction models by role (see `construction_models`), already served.
        """
        yield self.build(sample=sample, seed=seed, source=source)

    @classmethod
    def read_source(cls, source: Path, params: Any) -> None:
        """Read and check the input at `source` with this benchmark's own readers, raising InputError or
        ConfigError at the first problem. Cheap readers only (no model, no embedding): it runs before any
        server starts. Default: nothing is read here, the build reads the source."""

    @classmethod
    def validate_source(cls, source: Path, params: Any) -> list[str]:
        """The problems of the input at `source`, one line each naming file, row and field (empty: none)."""
        try:
            cls.read_source(source, params)
        except (InputError, ConfigError) as exc:
            return [str(exc)]
        except OSError as exc:  # unreadable (permissions, a folder where a file belongs): still one line
            return [f"{exc.filename or source}: cannot read: {exc.strerror or exc}"]
        return []

    @classmethod
    def construction_models(cls, params: Any, backbones: Sequence[str]) -> dict[str, str]:
        """Role -> model name of the models the build itself needs (LLM-mode construction). Default: none."""
        return {}

    def stats(self, instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
        """Dataset statistics of the built or loaded data (the paper's data tables): name -> DataFrame.

        Shown by `perseval stats CONFIG`. Default: instances and history documents per group."""
        docs = Counter(d.owner for d in documents)
        frame = pd.DataFrame([{"group": i.group, "user": i.user_id} for i in instances], columns=["group", "user"])
        table = frame.groupby("group").agg(instances=("user", "size"), users=("user", "nunique"))
        table["history_documents"] = [sum(docs[u] for u in set(frame[frame["group"] == g]["user"]))
                                      for g in table.index]
        return {"instances_by_group": table}

    def combine(self, scores: list[InstanceScore]) -> list[InstanceScore]:
        """Instance metrics made from the metrics of several judges of one cell (e.g. an average over
        judges' metrics), added to the cell's scores by the score stage. Default: none."""
        return []

    def analyze_run(self, inputs: AnalysisInputs) -> dict[str, Any]:
        """The analysis stage's entry point: `analyze` on the scores unless a benchmark needs more (agent
        outputs and traces, judgments with their feedback, the history)."""
        return self.analyze(inputs.scores, inputs.instances)

    def analyze(self, scores: pd.DataFrame, instances: list[Instance]) -> dict[str, Any]:
        """Cross-cell analyses of this benchmark (the paper's tables and figures).

        `scores` is the long frame of every instance score of every cell of this benchmark, with
        columns ANALYSIS_COLUMNS. Returns name -> pandas DataFrame (logged as CSV + Markdown) or
        matplotlib Figure (logged as PNG). Default: none.
        """
        return {}


async def collect(batches: AsyncIterator[BenchmarkData]) -> BenchmarkData:
    """Every batch of a stream in one BenchmarkData (the in-memory view of a streamed build)."""
    out = BenchmarkData([], [], {})
    async for batch in batches:
        out.instances.extend(batch.instances)
        out.documents.extend(batch.documents)
        out.info.update(batch.info)
    return out


def gather(parts: Iterable[tuple[Iterable[Instance], Iterable[Document]]]) -> tuple[list[Instance], list[Document]]:
    """Every part's instances and documents, concatenated in order (a build's loop over groups or sessions)."""
    instances: list[Instance] = []
    documents: list[Document] = []
    for part_instances, part_documents in parts:
        instances += part_instances
        documents += part_documents
    return instances, documents


def build_all(bench: Benchmark, *, sample: int, seed: int, source: Path | None,
              models: Mapping[str, ChatModel] | None = None) -> BenchmarkData:
    """The streamed build of `bench`, gathered in memory (tests and small builds)."""
    return asyncio.run(collect(bench.batches(sample=sample, seed=seed, source=source, models=models)))


# Columns of the frame Benchmark.analyze receives: one row per instance score of one cell.
ANALYSIS_COLUMNS = [
    "cell", "agent", "agent_kind", "agent_params", "backbone", "retriever", "judge", "judge_model",  # the cell
    "instance_id", "repeat", "judge_repeat", "group", "metric", "value", "n_items", "n_unscored",
    "user_id",  # the instance's user: the cluster of every interval
]
