"""One typed, versioned record per `perseval run` (issue 42): what the run measured, read the same way by every
view. The track stage makes it once (`make_record`), writes it into the run's output folder
(`<output_root>/records/<parent run id>/record.json`, the instances beside it as `instances.parquet` when there
are many) and logs both to the parent MLflow run (`record/`); the headline the terminal prints, `compare`,
`samples --json` and the cells' MLflow child runs read their scores, intervals and users from it.

`computed_by` names the run whose outputs the record holds: this run, or, when the record's results equal
those of the latest earlier record of the same experiment (a re-run that took everything from the cache),
that record's `computed_by`. `compare` skips a run whose results equal the previous run's.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perseval.metrics.uncertainty import mde
from perseval.report.rows import HeadlineRow, spread

SCHEMA_VERSION = 1
RECORD = "record.json"
INSTANCES = "instances.parquet"
ARTIFACT_DIR = "record"
INLINE_INSTANCES = 2000  # more instances than this go to instances.parquet beside the record
DIGEST_TAG = "perseval.record_digest"
COMPUTED_BY_TAG = "perseval.computed_by"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExperimentRef(Model):
    name: str  # the file's `name:`
    file: str  # the experiment YAML's path
    settings_digest: str  # the effective settings' key (perseval.experiment.config.ResolvedExperiment.key)
    mlflow_experiment: str


class Estimate(Model):
    """A cell's headline score with its user-clustered interval: every field the metrics' estimate has."""

    point: Optional[float]  # None: nothing scored (never 0)
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


class Difference(Model):
    """The cell minus its benchmark's baseline cell (paired when scored on the same instances)."""

    baseline: str
    point: Optional[float]
    low: Optional[float]
    high: Optional[float]
    p_holm: Optional[float]
    paired: Optional[bool]
    users: Optional[int]
    mde: Optional[float]
    mde_reason: Optional[str] = None


class JudgeCheck(Model):
    """The judge's figures on answers of known verdict (judge_probes)."""

    auc: Optional[float]
    pass_rate_gold: Optional[float]
    pass_rate_bad: Optional[float]
    discriminates: Optional[bool]
    items: Optional[int]
    threshold: Optional[float] = None  # `threshold: calibrated`: the P(true) cut the probe chose


class Cost(Model):
    tokens_in: Optional[int] = None
    tokens_out: Optional[int] = None
    llm_seconds: Optional[float] = None
    wall_seconds: Optional[float] = None
    cost_usd: Optional[float] = None
    new_tokens_in: Optional[int] = None
    new_tokens_out: Optional[int] = None
    new_cost_usd: Optional[float] = None


class Verdict(Model):
    kind: str
    item_id: str
    judge_repeat: int
    score: Optional[float]
    status: str
    rationale: str


class InstanceRecord(Model):
    """One (instance, repeat) of one cell: ONE user id, the one the statistics cluster on."""

    cell: str  # the cell's key
    instance_id: str
    repeat: int
    user: str
    group: str
    score: Optional[float]
    status: str
    verdicts: list[Verdict] = Field(default_factory=list)
    trace_id: Optional[str] = None


class Parts(Model):
    """What a cell is: its benchmark, agent, backbone ("-": none), retriever ("-": none) and judge."""

    benchmark: str
    agent: str
    backbone: str
    retriever: str
    judge: str


class CellRecord(Model):
    key: str
    name: str  # benchmark/agent/backbone/retriever/judge
    parts: Parts
    metric: str
    status: str  # as the score stage reports it
    n: int  # instances scored
    unscored_items: int
    failed_outputs: int
    failed_judgments: int
    estimate: Estimate
    difference: Optional[Difference] = None
    judge_check: Optional[JudgeCheck] = None
    cost: Cost = Field(default_factory=Cost)
    mlflow_run_id: Optional[str] = None
    row: dict[str, Any]  # the headline row as the summary JSON has it (every field; the views print from it)


class RunRecord(Model):
    schema_version: int = SCHEMA_VERSION
    run_id: str  # the parent MLflow run
    experiment: ExperimentRef
    cells: list[CellRecord]
    instances: list[InstanceRecord] = Field(default_factory=list)
    instances_file: Optional[str] = None  # instances.parquet beside the record when there are many
    timings: dict[str, float] = Field(default_factory=dict)
    llm_requests: Optional[int] = None
    results_digest: str  # of the cells and instances: equal digests, equal results
    computed_by: str  # this run, or the earlier run whose results (cached outputs) this one repeats

    def cell(self, key_or_name: str) -> CellRecord:
        for c in self.cells:
            if key_or_name in (c.key, c.name):
                return c
        raise KeyError(f"no cell {key_or_name!r} in the record of run {self.run_id}")

    def headline_rows(self) -> list[HeadlineRow]:
        """The headline rows, in the headline's order, from the record."""
        return [HeadlineRow.of(c.row) for c in self.cells]

    def cell_instances(self, key: str) -> list[InstanceRecord]:
        return [i for i in self.instances if i.cell == key]


# ---- making one ---------------------------------------------------------------------------------------------

def estimate_of(row: Mapping[str, Any], overall: Mapping[str, Any]) -> Estimate:
    """A headline row's score as an Estimate (`overall`: the cell's Overall row of its score table, for the
    fields the row does not carry)."""
    se, reason = spread(_num(row.get("se")), row.get("ci_low"), row.get("ci_high"))
    reason = reason or row.get("se_reason")
    users = row.get("n_users")
    return Estimate(point=row.get("score"), low=row.get("ci_low"), high=row.get("ci_high"), level=float(row["level"]),
                    users=users, effective_users=_num(overall.get("effective_users")), se=se, se_reason=reason,
                    mde=mde(se, users) if se is not None and users else None,
                    mde_reason=reason if se is None and reason else None,
                    note=_text(overall.get("interval_note")))


def _num(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def _text(value: Any) -> str | None:
    """A table's text cell: None where it is empty (pandas reads a missing one as NaN)."""
    return value if isinstance(value, str) and value else None


def cell_record(cell: Any, row: Mapping[str, Any], overall: Mapping[str, Any], run_id: str | None) -> CellRecord:
    diff = None
    if row.get("baseline") and row.get("agent") != row.get("baseline"):
        diff = Difference(baseline=row["baseline"], point=row.get("delta_vs_baseline"), low=row.get("delta_ci_low"),
                          high=row.get("delta_ci_high"), p_holm=row.get("delta_p"), paired=row.get("delta_paired"),
                          users=row.get("delta_n_users"), mde=row.get("mde"), mde_reason=row.get("mde_reason"))
    check = None
    if row.get("judge_discriminates") is not None:
        check = JudgeCheck(auc=row.get("judge_auc"), pass_rate_gold=row.get("judge_pass_rate_gold"),
                           pass_rate_bad=row.get("judge_pass_rate_bad"), discriminates=row.get("judge_discriminates"),
                           items=row.get("judge_probe_items"), threshold=row.get("judge_threshold"))
    return CellRecord(key=cell.key, name=cell.name, parts=Parts(**{k: row[k] for k in Parts.model_fields}),
                      metric=row["metric"], status=row["status"], n=row["n"], unscored_items=row["unscored_items"],
                      failed_outputs=row["failed_outputs"], failed_judgments=row["failed_judgments"],
                      estimate=estimate_of(row, overall), difference=diff, judge_check=check,
                      cost=Cost(**{k: row.get(k) for k in Cost.model_fields}), mlflow_run_id=run_id,
                      row=json.loads(json.dumps(dict(row), default=_plain)))


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def instance_records(cell_key: str, samples: Iterable[Any]) -> list[InstanceRecord]:
    """A cell's samples (perseval.report.samples.Sample) as records."""
    return [InstanceRecord(cell=cell_key, instance_id=s.instance_id, repeat=s.repeat, user=s.user, group=s.group,
                           score=s.score, status=s.status, trace_id=s.trace_id,
                           verdicts=[Verdict(kind=v.kind, item_id=v.item_id, judge_repeat=v.judge_repeat,
                                             score=v.score, status=v.status, rationale=v.rationale or "")
                                     for v in s.verdicts]) for s in samples]


def results_digest(cells: Sequence[CellRecord], instances: Sequence[InstanceRecord]) -> str:
    """What the run measured, hashed: the cells' scores, intervals and counts and every instance's user,
    score and verdicts (not the run ids, costs spent this run or timings, which differ on a cached re-run)."""
    body = {"cells": [c.model_dump(include={"key", "metric", "status", "n", "unscored_items", "failed_outputs",
                                            "failed_judgments", "estimate", "difference", "judge_check"},
                                   exclude=_uncalibrated(c)) for c in cells],
            "instances": [i.model_dump(exclude={"trace_id"}) for i in instances]}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _uncalibrated(cell: CellRecord) -> dict[str, Any] | None:
    """A judge check's threshold enters the digest only when the judge was calibrated: records made before the
    field existed keep their digests."""
    check = cell.judge_check
    return {"judge_check": {"threshold"}} if check is not None and check.threshold is None else None


def make_record(run_id: str, experiment: ExperimentRef, cells: list[CellRecord], instances: list[InstanceRecord],
                previous: RunRecord | None, timings: Mapping[str, float] | None = None,
                llm_requests: int | None = None) -> RunRecord:
    digest = results_digest(cells, instances)
    same = previous is not None and previous.results_digest == digest
    return RunRecord(run_id=run_id, experiment=experiment, cells=cells, instances=instances,
                     timings=dict(timings or {}), llm_requests=llm_requests, results_digest=digest,
                     computed_by=previous.computed_by if same and previous else run_id)


def record_metrics(cell: CellRecord) -> dict[str, float]:
    """A cell's MLflow child-run metrics of its interval (and its difference to the baseline), from its record:
    the names MLflow has always had (ci_low, ci_high, se, n_users, delta_*, mde); an absent value not logged."""
    e, d = cell.estimate, cell.difference
    values = {"ci_low": e.low, "ci_high": e.high, "se": e.se, "n_users": e.users, "effective_users": e.effective_users}
    if d is not None:
        values |= {"delta_vs_baseline": d.point, "delta_ci_low": d.low, "delta_ci_high": d.high, "delta_p": d.p_holm,
                   "mde": d.mde}
    return {k: float(v) for k, v in values.items() if v is not None}


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
        pq.write_table(pa.Table.from_pylist([i.model_dump() | {"verdicts": json.dumps([v.model_dump() for v in
                                                                                      i.verdicts])}
                                             for i in record.instances]), folder / INSTANCES)
        out = record.model_copy(update={"instances": [], "instances_file": INSTANCES})
    (folder / RECORD).write_text(out.model_dump_json(indent=1))
    return folder


class RecordError(ValueError):
    """A record that cannot be read (truncated, of another schema, edited): the message names the file (or the
    run whose artifact it is) and what is wrong, in one line."""


def read_record(path: str | Path, shown: str | None = None) -> RunRecord:
    """A record.json (or the folder holding it), its instances read back from instances.parquet if there.
    RecordError, naming `shown` (default: the file), for a record that cannot be read."""
    path = Path(path)
    folder, file = (path, path / RECORD) if path.is_dir() else (path.parent, path)
    where = shown or str(file)
    try:
        data = json.loads(file.read_text())
    except OSError as exc:
        raise RecordError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise RecordError(f"{where}: not valid JSON ({exc}); the file is truncated or damaged") from None
    if not isinstance(data, dict):
        raise RecordError(f"{where}: a record is a JSON object, this is {type(data).__name__}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise RecordError(f"{where}: schema_version {data.get('schema_version')!r}; this perseval reads "
                          f"{SCHEMA_VERSION} (a record of another perseval version, or edited)")
    try:
        record = RunRecord.model_validate(data)
        if record.instances_file:
            rows = pq.read_table(folder / record.instances_file).to_pylist()
            record = record.model_copy(update={"instances": [InstanceRecord.model_validate(
                r | {"verdicts": json.loads(r["verdicts"])}) for r in rows]})
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{where}: {at}: {first['msg']} ({exc.error_count()} problem(s); the record was "
                          "edited or damaged)") from None
    except (OSError, ValueError, pa.ArrowException) as exc:  # instances.parquet missing, truncated
        raise RecordError(f"{where}: its instances file {record.instances_file} cannot be read "
                          f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return record


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
            data = json.loads(file.read_text())
            if data.get("schema_version") != SCHEMA_VERSION:
                raise RecordError(f"{file}: schema_version {data.get('schema_version')!r}")
        except (OSError, ValueError, AttributeError) as exc:
            damaged.append(str(exc) if isinstance(exc, RecordError) else f"{file}: cannot be read")
            continue
        if data.get("experiment", {}).get("settings_digest") == settings_digest:
            found.append((file.stat().st_mtime, file))
    if not found:
        return Previous(damaged=damaged)
    try:
        return Previous(record=read_record(max(found)[1]), damaged=damaged)
    except RecordError as exc:
        return Previous(damaged=[*damaged, str(exc)])


def download_record(client: Any, run_id: str) -> RunRecord | None:
    """The record logged to a parent run (None: a run logged before records existed)."""
    import tempfile

    if not [f for f in client.list_artifacts(run_id, ARTIFACT_DIR) if f.path.endswith(RECORD)]:
        return None
    with tempfile.TemporaryDirectory() as tmp:  # named as the run's artifact, not as the download's path
        return read_record(Path(client.download_artifacts(run_id, ARTIFACT_DIR, tmp)),
                           shown=f"the record of run {run_id[:8]} (MLflow artifact {ARTIFACT_DIR}/{RECORD})")
