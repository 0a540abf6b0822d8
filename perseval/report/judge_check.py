"""`perseval judge-check`: a judge's agreement with human labels, from what a run already stored.

Three sources of pairs, in this order:
  --judge-labels FILE  the judge's labels in a second file of the labels layout (the IBA validation
                       labeller's CSV beside the annotators', as `perseval agreement` reads them);
  LABELS               a human labels CSV (perseval.judges.labels) joined with the judgments every judge
                       of the experiment stored for its plain cells (run the experiment first);
  neither              the labels the data carries (Benchmark.human_scores: Bespoke's meta-test human
                       scores), against each cell's scores brought back to the humans' scale.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
import mlflow
import pandas as pd

from perseval.experiment.config import MLflowSettings, ResolvedExperiment
from perseval.core.errors import InputError
from perseval.judges.labels import file_pairs, instance_users, judge_scores, label_pairs, read_labels
from perseval.metrics.validity import Pairs, validity_table
from perseval.pipeline.plan import Plan, make_plan
from perseval.core.instances import InstanceScore, Judgment
from perseval.pipeline.stages import load_instances
from perseval.core.store import StageStore
from perseval.report.tracking import ensure_experiment, log_table, mlflow_key
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


def judge_check(exp: ResolvedExperiment, labels: Path | None = None, judge_labels: Path | None = None,
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


def validity_metrics(table: pd.DataFrame) -> dict[str, float]:
    out = {}
    for _, row in table.iterrows():
        for stat in ("pearson", "spearman", "kappa", "alpha"):
            v = row.get(stat)
            if v is not None and v == v:
                out[f"validity.{mlflow_key(row['judge'])}.{mlflow_key(row['criterion'])}.{stat}"] = float(v)
    return out


def log_validity(settings: MLflowSettings, name: str, table: pd.DataFrame, matrices: dict[str, pd.DataFrame],
                 base: Path | None = None) -> str:
    """A run `judge-check <name>` holding the table, the confusion matrices and one metric per statistic."""
    ensure_experiment(settings, base)
    mlflow.set_experiment(settings.experiment)
    with mlflow.start_run(run_name=f"judge-check {name}", tags={"perseval.kind": "judge-check"}) as run:
        log_validity_artifacts(table, matrices)
        return run.info.run_id


def log_validity_artifacts(table: pd.DataFrame, matrices: dict[str, pd.DataFrame]) -> None:
    """Into the active MLflow run: judge_validity/validity.{csv,md}, one confusion_*.csv each, metrics."""
    log_table(table.set_index(["judge", "criterion"]), "validity", "judge_validity")
    with tempfile.TemporaryDirectory() as tmp:
        for key, matrix in matrices.items():
            matrix.to_csv(Path(tmp) / f"confusion_{mlflow_key(key).replace('/', '_')}.csv")
        mlflow.log_artifacts(tmp, "judge_validity")
    mlflow.log_metrics(validity_metrics(table))


def format_table(table: pd.DataFrame) -> str:
    cols = [c for c in ("judge", "criterion", "n", "clusters", "pearson", "spearman", "kappa", "kappa_ci_low",
                        "kappa_ci_high", "alpha", "alpha_level", "alpha_ci_low", "alpha_ci_high") if c in table]
    return table[cols].to_markdown(index=False, floatfmt=".3f")



def log_run_validity(plan: Plan, root: str) -> None:
    """Into the active (parent) MLflow run: the validity table of every evaluator whose data carries human
    labels (Bespoke's meta-test), beside the paper's Table 3, and the judges' reliability table."""
    from perseval.report.reliability import log_reliability

    pairs = data_label_pairs(plan, root)
    if pairs:
        log_validity_artifacts(*validity_table(pairs, seed=plan.exp.experiment.seed))
    log_reliability(plan, root)  # judges against each other and themselves: no label needed
