"""One typed, versioned record per `perseval run`: what the run measured, and the only thing a view reads.

The track stage builds it once from the stage outputs (perseval.report.build), writes it into the run's output
folder (`<output_root>/records/<parent run id>/record.json`, the instances beside it as `instances.parquet` when
there are many, and the per-sample log `samples.jsonl`) and logs the folder to the parent MLflow run (`record/`).
Every view renders it and nothing else: the headline and the Controls table `perseval run` prints, `compare`,
`samples`, the cross-benchmark table, the MLflow child and parent runs and the summary JSON
(perseval.report.views); none recomputes a statistic.

Each cell (a control cell too) has typed sections: its status (statuses count instances: a cell where an
instance is unscored is never complete), its estimate, its difference to the baseline, the probe check of its
judge, its controls (personalization and history gains with intervals), evidence attribution and cost. A cell
whose judge does not discriminate (its probe check) is not interpretable: its estimate has no point or interval
(the raw mean is kept as `uninterpretable_mean`, with the reason), it has no difference and no gain, and it is
left out of every Holm family.

`computed_by` names the run whose outputs the record holds: this run, or, when the record's results equal
those of the latest earlier record of the same experiment (a re-run that took everything from the cache),
that record's `computed_by`. `compare` skips a run whose results equal the previous run's.

Version 1 records (an untyped headline `row` per cell) are read too: `upgrade_v1` makes them version 2.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from perseval.report.legacy import upgrade_v1

SCHEMA_VERSION = 2
READS = (1, 2)  # the schema versions this perseval reads (1 is upgraded on reading)
RECORD = "record.json"
INSTANCES = "instances.parquet"
SAMPLES = "samples.jsonl"  # the per-sample log beside the record (perseval.report.sink.samples_log)
ARTIFACT_DIR = "record"
INLINE_INSTANCES = 2000  # more instances than this go to instances.parquet beside the record
DIGEST_TAG = "perseval.record_digest"
COMPUTED_BY_TAG = "perseval.computed_by"
STATUSES = ("complete", "partly scored", "unscored", "incomplete", "no items")


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExperimentRef(Model):
    name: str  # the file's `name:`
    file: str  # the experiment YAML's path
    settings_digest: str  # the effective settings' key (perseval.experiment.config.ResolvedExperiment.key)
    mlflow_experiment: str


class Parts(Model):
    """What a cell is: its benchmark entry, agent, backbone ("-": none), retriever ("-": none) and judge."""

    benchmark: str
    agent: str
    backbone: str
    retriever: str
    judge: str


class Status(Model):
    """What a cell's score rests on and what was left out, counted in instances (a judge's items apart)."""

    word: str  # one of STATUSES
    instances: int  # instances the judge judged (an output it had items of)
    scored: int  # of them, those with a score: what the estimate rests on
    scored_share: Optional[float]  # percent of `instances` scored; None when nothing was judged
    items: int = 0  # the judge's items over those instances
    unscored_items: int = 0  # items a judge left unscored (its verdict could not be read)
    unscored_item_share: Optional[float] = None  # percent of `items`
    invalid_outputs: int = 0
    failed_outputs: int = 0
    failed_judgments: int = 0


class Estimate(Model):
    """A cell's headline score with its user-clustered interval."""

    point: Optional[float]  # None: nothing scored (never 0), or not interpretable (uninterpretable_mean)
    low: Optional[float]
    high: Optional[float]
    level: float
    users: Optional[int]  # the users (clusters) it rests on
    effective_users: Optional[float] = None  # Kish's effective number, where the estimate gives it
    se: Optional[float]  # the SE the interval used; None with `se_reason` where it used none
    se_reason: Optional[str] = None
    mde: Optional[float]  # the smallest difference to a fixed value detectable at 80% power with these users
    mde_reason: Optional[str] = None
    note: Optional[str] = None  # the estimate's own note (why an interval is withheld)
    weighting: str = "instance"  # the estimand: mean over instances, or ("user") the mean of users' means
    uninterpretable_mean: Optional[float] = None  # the raw mean of a cell whose judge does not discriminate
    uninterpretable_reason: Optional[str] = None  # why its point, interval and differences are withheld


class Difference(Model):
    """The cell minus its benchmark's baseline cell (paired when scored on the same instances)."""

    baseline: str  # the baseline agent
    baseline_cell: str  # the baseline cell's key
    point: Optional[float]
    low: Optional[float]
    high: Optional[float]
    p_holm: Optional[float]  # Holm-corrected across the run's interpretable baseline comparisons
    paired: Optional[bool]
    users: Optional[int]
    effective_users: Optional[float] = None
    mde: Optional[float]
    mde_reason: Optional[str] = None


class ProbeCheck(Model):
    """The judge's figures on answers of known verdict (judge_probes): does it discriminate?"""

    auc: Optional[float]
    auc_low: Optional[float] = None  # DeLong's 95% interval, probe items as the unit
    auc_high: Optional[float] = None
    auc_from: Optional[str] = None  # p_true: AUC of the verdict probabilities; verdict: of the 0/1 verdicts
    pass_rate_gold: Optional[float]
    pass_rate_bad: Optional[float]
    discriminates: Optional[bool]
    items: Optional[int]
    gold_items: Optional[int] = None
    bad_items: Optional[int] = None
    threshold: Optional[float] = None  # `threshold: calibrated`: the P(true) cut the probe chose
    flag: Optional[str] = None  # why it does not discriminate


class Gain(Model):
    """Own minus a reference cell over the instances both scored, paired over users, in score points."""

    reference: str  # the reference cell's key (the swapped-history control, or the no-history agent's cell)
    reference_label: str  # as the views name it
    point: Optional[float]
    low: Optional[float]
    high: Optional[float]
    p: Optional[float]
    p_holm: Optional[float] = None  # across every gain of the run (both kinds, interpretable cells)
    instances: int
    users: int
    own: Optional[float]  # own mean over the shared instances (own - reference_score = point)
    reference_score: Optional[float]  # the reference's mean over the same instances
    small_n: bool = False


class MetricGain(Model):
    """The personalization gain on one metric (Bespoke: recall should barely move under the swap, E_p should)."""

    metric: str
    own: Optional[float]
    swapped: Optional[float]
    point: Optional[float]
    low: Optional[float]
    high: Optional[float]
    p: Optional[float]
    p_holm: Optional[float] = None  # across every (cell, metric) gain of the run
    instances: int
    users: int
    small_n: bool = False


class Controls(Model):
    """What a plain cell's score means: is it this user's history that helps, does history help at all."""

    note: Optional[str] = None  # NO_HISTORY_NOTE, or why the gains are withheld
    zero_by_construction: bool = False  # an agent that uses no history: both gains are 0, no control is run
    personalization: Optional[Gain] = None  # own - swapped history
    history: Optional[Gain] = None  # own - no history
    by_metric: list[MetricGain] = Field(default_factory=list)


class Attribution(Model):
    """Did the gold evidence reach the agent's context (perseval.report.analyses.attribution)?"""

    evidence_recall: float  # percent, mean over instances with evidence and a context
    instances: int
    score_reached: Optional[float]  # the score of instances where some evidence reached the context
    reached: int
    score_missed: Optional[float]
    missed: int


class Cost(Model):
    tokens_in: Optional[int] = None
    tokens_out: Optional[int] = None
    llm_seconds: Optional[float] = None
    wall_seconds: Optional[float] = None
    cost_usd: Optional[float] = None
    new_tokens_in: Optional[int] = None
    new_tokens_out: Optional[int] = None
    new_cost_usd: Optional[float] = None


class CellRecord(Model):
    key: str
    name: str  # benchmark/agent/backbone/retriever/judge (a control's: then " [control]")
    label: str  # the name every view shows: the fewest parts that tell it apart in its benchmark
    parts: Parts
    role: str = "history"  # the agent's role across benchmarks: history, no history, oracle
    metric: str  # the headline metric, as its benchmark names it (hit@1)
    control: Optional[str] = None  # a control cell: which (swapped-history)
    plain: Optional[str] = None  # a control cell: its plain cell's key
    baseline: Optional[str] = None  # the entry's baseline agent, where it names one
    data_key: Optional[str] = None  # the benchmark build it was scored on: cells of one build compare paired
    status: Status
    estimate: Estimate
    difference: Optional[Difference] = None
    probe: Optional[ProbeCheck] = None
    controls: Optional[Controls] = None
    attribution: Optional[Attribution] = None
    cost: Cost = Field(default_factory=Cost)
    mlflow_run_id: Optional[str] = None

    @property
    def interpretable(self) -> bool:
        """False when the cell's judge was probed and does not discriminate: no number of it means anything."""
        return self.probe is None or self.probe.discriminates is not False


# Verdict and InstanceRecord are slotted pydantic dataclasses, not models: a record holds one per instance and
# cell (80,000 at 20,000 instances and four cells) and a model with its __dict__ and fields-set takes about 1 KB
# where these take under 100 bytes. They validate the same; `as_dict` is their model_dump.
_ROW = ConfigDict(extra="forbid")


@dataclass(slots=True, frozen=True, config=_ROW)
class Verdict:
    kind: str
    item_id: str
    judge_repeat: int
    score: Optional[float]
    status: str
    rationale: str
    p_true: Optional[float] = None


@dataclass(slots=True, frozen=True, config=_ROW)
class InstanceRecord:
    """One (instance, repeat) of one cell: ONE user id, the one the statistics cluster on."""

    cell: str  # the cell's key
    instance_id: str
    repeat: int
    user: str
    group: str
    score: Optional[float]
    status: str
    verdicts: list[Verdict] = field(default_factory=list)
    trace_id: Optional[str] = None


def as_dict(row: Verdict | InstanceRecord) -> dict[str, Any]:
    """A verdict or instance as plain JSON values (its verdicts too), as the record file holds it
    (dataclasses.asdict, without its deep copy of every value: a third of a large record's digest)."""
    out = {f: getattr(row, f) for f in row.__dataclass_fields__}
    if isinstance(row, InstanceRecord):
        out["verdicts"] = [as_dict(v) for v in row.verdicts]
    return out


class Traces(Model):
    """Which instances have an MLflow trace: `selection` as the experiment's `mlflow.traces` resolved (all,
    failed, or the first N instances of each cell); the record and samples.jsonl hold every instance."""

    selection: str  # "all", "failed" or a number
    traced: int  # (instance, repeat) outputs with a trace
    outputs: int  # of all


class RunRecord(Model):
    schema_version: int = SCHEMA_VERSION
    run_id: str  # the parent MLflow run
    experiment: ExperimentRef
    cells: list[CellRecord]  # the plain cells in the headline's order, each control cell after its plain cell
    instances: list[InstanceRecord] = Field(default_factory=list)
    instances_file: Optional[str] = None  # instances.parquet beside the record when there are many
    traces: Optional[Traces] = None
    timings: dict[str, float] = Field(default_factory=dict)
    llm_requests: Optional[int] = None
    results_digest: str  # of the cells and instances: equal digests, equal results
    computed_by: str  # this run, or the earlier run whose results (cached outputs) this one repeats
    upgraded_from: Optional[int] = None  # the schema version it was written in, where it was read as this one

    def cell(self, key_or_name: str) -> CellRecord:
        for c in self.cells:
            if key_or_name in (c.key, c.name):
                return c
        raise KeyError(f"no cell {key_or_name!r} in the record of run {self.run_id}")

    def plain_cells(self) -> list[CellRecord]:
        return [c for c in self.cells if c.control is None]

    def control_cells(self) -> list[CellRecord]:
        return [c for c in self.cells if c.control is not None]

    def cell_instances(self, key: str) -> list[InstanceRecord]:
        return [i for i in self.instances if i.cell == key]


# ---- what a record measured -----------------------------------------------------------------------------

# the sections of a cell that are results (not run ids, costs spent this run or timings, which differ on a
# cached re-run)
RESULT_FIELDS = {"key", "metric", "status", "estimate", "difference", "probe", "controls", "attribution"}


def results_digest(cells: Sequence[CellRecord], instances: Iterable[InstanceRecord]) -> str:
    """What the run measured, hashed: the cells' scores, intervals, counts, gains and probe checks, and every
    instance's user, score and verdicts (never its trace id). Hashed as it is encoded, an instance at a time, so
    a large record is never one string; the bytes are json.dumps of {"cells": [...], "instances": [...]} with
    sorted keys, as they always were (an earlier record's digest still matches)."""
    h = hashlib.sha256()
    h.update(b'{"cells": ' + _json([c.model_dump(include=RESULT_FIELDS) for c in cells]) + b', "instances": [')
    for n, i in enumerate(instances):
        row = as_dict(i)
        del row["trace_id"]
        h.update((b", " if n else b"") + _json(row))
    h.update(b"]}")
    return h.hexdigest()[:16]


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, default=str).encode()


def make_record(run_id: str, experiment: ExperimentRef, cells: list[CellRecord], instances: list[InstanceRecord],
                previous: RunRecord | None, timings: dict[str, float] | None = None,
                llm_requests: int | None = None, traces: Traces | None = None, digest: str | None = None) -> RunRecord:
    """The record; `digest`: results_digest(cells, instances) where the caller has it already."""
    digest = digest or results_digest(cells, instances)
    same = previous is not None and previous.results_digest == digest
    return RunRecord(run_id=run_id, experiment=experiment, cells=cells, instances=instances, traces=traces,
                     timings=dict(timings or {}), llm_requests=llm_requests, results_digest=digest,
                     computed_by=previous.computed_by if same and previous else run_id)


def without_score(cells: Iterable[CellRecord]) -> dict[str, list[str]]:
    """Benchmark entry -> the statuses of its plain cells, for each entry none of whose cells has a score (a
    benchmark that produced no number: every verdict unreadable, nothing to judge, all failed). A cell whose
    judge does not discriminate has a mean, only not an interpretable one: it counts as scored here."""
    by_entry: dict[str, list[CellRecord]] = {}
    for c in cells:
        if c.control is None:
            by_entry.setdefault(c.parts.benchmark, []).append(c)
    return {entry: sorted({c.status.word for c in members}) for entry, members in by_entry.items()
            if all(c.estimate.point is None and c.estimate.uninterpretable_mean is None for c in members)}


# ---- where it lives ---------------------------------------------------------------------------------------

def records_dir(root: str | Path) -> Path:
    return Path(root) / "records"


def record_dir(root: str | Path, run_id: str) -> Path:
    return records_dir(root) / run_id


def write_record(record: RunRecord, root: str | Path) -> Path:
    """record.json (and instances.parquet when there are many instances) in the run's folder; returns it."""
    folder = record_dir(root, record.run_id)
    folder.mkdir(parents=True, exist_ok=True)
    out = record
    if len(record.instances) > INLINE_INSTANCES:
        # pyarrow, not pandas: a missing value stays null and reads back as None (pandas made a missing trace id
        # NaN, which the reader refused after a run's whole work)
        pq.write_table(instances_table(record.instances), folder / INSTANCES)
        out = record.model_copy(update={"instances": [], "instances_file": INSTANCES})
    (folder / RECORD).write_text(out.model_dump_json(indent=1))
    return folder


def instances_table(instances: Sequence[InstanceRecord]) -> pa.Table:
    """The instances as instances.parquet holds them: a column per field, the verdicts as one JSON text each."""
    columns: dict[str, list[Any]] = {name: [getattr(i, name) for i in instances] for name in INSTANCES_SCHEMA.names
                                     if name != "verdicts"}
    columns["verdicts"] = [json.dumps([as_dict(v) for v in i.verdicts]) for i in instances]
    return pa.table(columns, schema=INSTANCES_SCHEMA)


INSTANCES_SCHEMA = pa.schema([("cell", pa.string()), ("instance_id", pa.string()), ("repeat", pa.int64()),
                              ("user", pa.string()), ("group", pa.string()), ("score", pa.float64()),
                              ("status", pa.string()), ("verdicts", pa.string()), ("trace_id", pa.string())])
_INSTANCES = TypeAdapter(list[InstanceRecord])


class RecordError(ValueError):
    """A record that cannot be read (truncated, of another schema, edited): the message names the file (or the
    run whose artifact it is) and what is wrong, in one line."""


def _load(file: Path, where: str) -> dict[str, Any]:
    """The record's JSON, of a version this perseval reads (RecordError otherwise)."""
    try:
        data = json.loads(file.read_text())
    except OSError as exc:
        raise RecordError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise RecordError(f"{where}: not valid JSON ({exc}); the file is truncated or damaged") from None
    if not isinstance(data, dict):
        raise RecordError(f"{where}: a record is a JSON object, this is {type(data).__name__}")
    if data.get("schema_version") not in READS:
        raise RecordError(f"{where}: schema_version {data.get('schema_version')!r}; this perseval reads "
                          f"{' and '.join(map(str, READS))} (a record of another perseval version, or edited)")
    return data


def read_record(path: str | Path, shown: str | None = None) -> RunRecord:
    """A record.json (or the folder holding it), its instances read back from instances.parquet if there; a
    version 1 record upgraded. RecordError, naming `shown` (default: the file), for one that cannot be read."""
    path = Path(path)
    folder, file = (path, path / RECORD) if path.is_dir() else (path.parent, path)
    where = shown or str(file)
    data = _load(file, where)
    try:
        record = RunRecord.model_validate(upgrade_v1(data) if data["schema_version"] == 1 else data)
        if record.instances_file:
            record = record.model_copy(update={"instances": read_instances(folder / record.instances_file)})
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{where}: {at}: {first['msg']} ({exc.error_count()} problem(s); the record was "
                          "edited or damaged)") from None
    except (KeyError, TypeError) as exc:  # a version 1 record edited past what its upgrade can read
        raise RecordError(f"{where}: version 1 record lacks {exc} (the record was edited or damaged)") from None
    except (OSError, ValueError, pa.ArrowException) as exc:  # instances.parquet missing, truncated
        raise RecordError(f"{where}: its instances file {record.instances_file} cannot be read "
                          f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return record


def read_instances(path: Path) -> list[InstanceRecord]:
    """instances.parquet's rows, validated (ValidationError names the row and field)."""
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        r["verdicts"] = json.loads(r["verdicts"])
    return _INSTANCES.validate_python(rows)


class Previous(Model):
    """What the records under an output root say of the run before this one: the newest readable record of the
    experiment, and the records that could not be read (any of them may be that run's)."""

    record: Optional[RunRecord] = None
    damaged: list[str] = Field(default_factory=list)


def latest_record(root: str | Path, settings_digest: str, before: str | None = None) -> Previous:
    """The newest record under `root` of the experiment with these effective settings, and the records that
    cannot be read (each 'file: what is wrong')."""
    found, damaged = [], []
    for file in records_dir(root).glob(f"*/{RECORD}"):
        if file.parent.name == before:
            continue
        try:
            data = _load(file, str(file))
        except RecordError as exc:
            damaged.append(str(exc))
            continue
        if (data.get("experiment") or {}).get("settings_digest") == settings_digest:
            found.append((file.stat().st_mtime, file))
    if not found:
        return Previous(damaged=damaged)
    try:
        return Previous(record=read_record(max(found)[1]), damaged=damaged)
    except RecordError as exc:
        return Previous(damaged=[*damaged, str(exc)])
