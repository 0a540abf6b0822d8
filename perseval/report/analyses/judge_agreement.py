"""A judge's agreement with human labels (`perseval judge-check`), from what a run already stored. (Whether a
judge discriminates answers of known verdict, without labels, is its probe check: perseval.pipeline.probes.)

Three sources of pairs, in this order:
  --judge-labels FILE  the judge's labels in a second file of the labels layout (the IBA validation
                       labeller's CSV beside the annotators', as `perseval agreement` reads them);
  LABELS               a human labels CSV (perseval.judges.labels) joined with the judgments every judge
                       of the experiment stored for its plain cells (run the experiment first);
  neither              the labels the data carries (Benchmark.human_scores: Bespoke's meta-test human
                       scores), against each cell's scores brought back to the humans' scale.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from perseval.experiment.config import ResolvedExperiment
from perseval.core.errors import InputError
from perseval.judges.labels import file_pairs, instance_users, judge_scores, label_pairs, read_labels
from perseval.metrics.validity import Pairs, validity_table
from perseval.pipeline.plan import make_plan
from perseval.pipeline.units import Plan
from perseval.core.instances import InstanceScore, Judgment
from perseval.pipeline.stages import load_instances
from perseval.core.store import StageStore
from perseval.kernel.registry import benchmark_class


def stored_judgment_pairs(plan: Plan, root: str, labels_path: Path) -> list[Pairs]:
    labels = read_labels(labels_path)
    by_judge: dict[str, list[Judgment]] = {}
    users: dict[str, str] = {}
    for judged in plan.judgings():
        store = StageStore(root, "judge", judged.key)
        if judged.run.control is None and store.parts():
            by_judge.setdefault(judged.judge.name, []).extend(store.read_records(Judgment))
            users |= instance_users(load_instances(root, judged.run.data.key))
    scores = {name: judge_scores(js, name) for name, js in by_judge.items()}
    return label_pairs(labels, scores, users, str(labels_path))


def data_label_pairs(plan: Plan, root: str) -> list[Pairs]:
    """Each cell's scores beside the human scores its benchmark's data carries (Benchmark.human_scores: Bespoke's
    meta-test ratings), per metric, the cell's scores brought back to the humans' scale."""
    out = []
    read: dict[str, tuple[dict, dict]] = {}  # data key -> (instances, human scores): cells of one entry share them
    for cell in plan.cells:
        bench = benchmark_class(cell.benchmark)
        store = StageStore(root, "score", cell.key)
        if not bench.carries_human_labels or cell.run.control is not None or not store.parts():
            continue
        if cell.run.data.key not in read:
            loaded = {i.instance_id: i for i in load_instances(root, cell.run.data.key)}
            read[cell.run.data.key] = loaded, {iid: bench.human_scores(inst) for iid, inst in loaded.items()}
        insts, human = read[cell.run.data.key]
        values: dict[tuple[str, str], list[float]] = {}
        for s in store.read_records(InstanceScore):
            if s.metric in human.get(s.instance_id, {}) and s.value is not None:
                values.setdefault((s.instance_id, s.metric), []).append(s.value / bench.human_scale)
        for metric in dict.fromkeys(m for h in human.values() for m in h):
            keys = sorted(k for k in values if k[1] == metric)
            pairs = Pairs(f"{cell.agent}/{cell.backbone or '-'}", metric,
                          [sum(values[k]) / len(values[k]) for k in keys], [human[k[0]][metric] for k in keys],
                          [insts[k[0]].user_id for k in keys])
            if pairs.judge:
                out.append(pairs)
    return out


def judge_agreement(exp: ResolvedExperiment, labels: Path | None = None, judge_labels: Path | None = None,
                    seed: int = 0) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The validity table (one row per judge and criterion) and the confusion matrices."""
    root = str(Path(exp.experiment.output_root).resolve())
    if judge_labels is not None:
        if labels is None:
            raise InputError(str(judge_labels), "--judge-labels needs the human LABELS file beside it")
        pairs = file_pairs(read_labels(labels), read_labels(judge_labels), judge_labels.stem)
    else:
        plan = make_plan(exp)
        pairs = stored_judgment_pairs(plan, root, labels) if labels else data_label_pairs(plan, root)
    if not pairs:
        where = str(labels or exp.path)
        raise InputError(where, "no labelled item has a judge score: run the experiment first (`perseval run`), and "
                                "check that instance_id / item_id / agent name judged items (docs/judge-labels.md)")
    return validity_table(pairs, seed=seed)
