"""From a score to its instances: every instance of a cell with its user, score, the judge's verdicts and
rationales and its trace, read back from the cell's MLflow child run (the `parquet/run`, `parquet/judge` and
`parquet/score` artifacts the track stage logged, and the traces tagged with the cell's score key), so it
works wherever the MLflow store is, not only beside the run's outputs.

Cells are named as the headline names them: the full name (`iba/iba-rag/smollm2-135m/minilm/iba.slots`), a
prefix of it (`iba/iba-rag`), or parts of it joined by `/` in any order (`iba-rag`, `iba-rag/iba.slots`). A
name that fits several cells is refused with the cells it fits, before anything is printed; two names
(`--between A B`) are paired cell by cell on what they leave open (the same benchmark and judge, and the
same backbone and retriever where both have them), so `--between iba-rag iba-no-history` sets the two agents
side by side under each judge.
"""
from __future__ import annotations

import math
import operator
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from mlflow.tracking import MlflowClient

from perseval.core.instances import AgentOutput, InstanceScore, Judgment
from perseval.core.schema import from_table
from perseval.metrics.ci_tables import cluster_of
from perseval.report.comparisons import pick_baseline
from perseval.report.tracking import mlflow_key
from perseval.report.traces import Outcome, RunTraces, cell_filter

TAG = "perseval."
PARTS = ("benchmark", "agent", "backbone", "retriever", "judge")
PROGRESS_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
TEXT_CHARS = 400  # an output or a rationale as the terminal shows it (the HTML and the trace hold 2,000)


def quiet_artifacts() -> None:
    """No "Downloading artifacts" progress bar per artifact read (MLflow prints one per download)."""
    os.environ[PROGRESS_ENV] = "false"


def trace_url(ui: str, experiment_id: str, trace_id: str) -> str:
    """Where the MLflow UI (3.x) opens one trace: the experiment's Traces tab with the trace selected."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}"


# ---- naming cells -----------------------------------------------------------------------------------------

def cell_name(run: Any) -> str:
    return run.data.tags.get(TAG + "cell", run.info.run_name or "")


def cell_parts(run: Any) -> tuple[str, ...]:
    """(benchmark, agent, backbone, retriever, judge) of a child run, from its tags (else its name)."""
    tags = run.data.tags
    if all(TAG + p in tags for p in PARTS):
        return tuple(tags[TAG + p] for p in PARTS)
    parts = cell_name(run).split(" [")[0].split("/")
    return tuple(parts + ["-"] * (len(PARTS) - len(parts)))[:len(PARTS)]


def is_control(run: Any) -> bool:
    return " [" in cell_name(run)


def matches(run: Any, spec: str) -> bool:
    """Whether `spec` names the cell: its full name, a prefix of it, or some of its parts joined by '/'."""
    name = cell_name(run)
    if name == spec or name.startswith(spec):
        return True
    tokens = [t for t in spec.split("/") if t]
    parts = cell_parts(run)
    return bool(tokens) and all(t in parts for t in tokens) and (not is_control(run) or "[" in spec)


def _listing(runs: Iterable[Any]) -> str:
    return ", ".join(sorted(cell_name(r) for r in runs if not is_control(r)))


def resolve_cell(runs: Sequence[Any], spec: str) -> Any:
    """The one child run `spec` names; ValueError naming the cells it fits (or all of them) otherwise."""
    exact = [r for r in runs if cell_name(r) == spec]
    found = exact or [r for r in runs if matches(r, spec)]
    if len(found) != 1:
        which = "no cell" if not found else f"{len(found)} cells ({_listing(found)})"
        raise ValueError(f"{spec!r} names {which} of the run, not one; add the judge or backbone "
                         f"(e.g. {spec}/{cell_parts(found[0])[4] if found else '<judge>'}); its cells: {_listing(runs)}")
    return found[0]


def resolve_pairs(runs: Sequence[Any], a: str, b: str) -> list[tuple[Any, Any]]:
    """The pairs of cells `--between a b` sets side by side (see the module doc); ValueError when a name fits
    no cell or leaves a pairing open."""
    side_a = [r for r in runs if cell_name(r) == a] or [r for r in runs if matches(r, a)]
    side_b = [r for r in runs if cell_name(r) == b] or [r for r in runs if matches(r, b)]
    for spec, side in ((a, side_a), (b, side_b)):
        if not side:
            raise ValueError(f"{spec!r} names 0 cells of the run; its cells: {_listing(runs)}")
    if {r.info.run_id for r in side_a} & {r.info.run_id for r in side_b}:
        raise ValueError(f"{a!r} and {b!r} name some of the same cells ({_listing(side_a)}): name two different ones")
    pairs = []
    for ra in side_a:
        pa_ = cell_parts(ra)
        candidates = [(_attrs(rb), rb) for rb in side_b
                      if cell_parts(rb)[0] == pa_[0] and cell_parts(rb)[4] == pa_[4]]
        if len(side_a) == len(side_b) == 1:
            candidates = [(_attrs(side_b[0]), side_b[0])]
        rb = pick_baseline(_attrs(ra), candidates) if candidates else None
        if rb is None and len(side_a) > 1:
            continue  # this cell of A has no counterpart in B (another judge): left out
        if rb is None:
            raise ValueError(f"{a!r} ({cell_name(ra)}) has no single counterpart among the cells {b!r} names "
                             f"({_listing(side_b)}): name both cells in full")
        pairs.append((ra, rb))
    if not pairs:
        raise ValueError(f"{a!r} ({_listing(side_a)}) and {b!r} ({_listing(side_b)}) share no benchmark and judge: "
                         "name both cells in full")
    return pairs


def _attrs(run: Any) -> dict[str, str]:
    parts = cell_parts(run)
    return {"backbone": parts[2], "retriever": parts[3]}


# ---- the instances of one cell --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """One judgment of an instance: the item, its value (None: unscored or failed) and the judge's words."""

    kind: str
    item_id: str
    judge: str
    judge_repeat: int
    score: float | None
    status: str
    rationale: str
    raw: str

    @classmethod
    def of(cls, j: Judgment) -> "Verdict":
        return cls(j.kind, j.item_id, j.judge, j.judge_repeat, j.score, j.status, j.feedback, j.raw)

    def mark(self) -> str:
        if self.status != "scored" or self.score is None:
            return "?" if self.status == "unscored" else "!"
        return "✓" if self.score >= 1 else "✗" if self.score <= 0 else f"{self.score:g}"


@dataclass
class Sample:
    """One (instance, repeat) of a cell as `perseval samples` lists it."""

    instance_id: str
    repeat: int
    user: str  # the cluster of the score's interval (perseval.pipeline.stages: the instance's user or persona)
    group: str
    score: float | None  # the cell's headline metric (mean over judge repeats); None: unscored
    status: str  # scored / unscored / judge_failed / not_judged / failed / invalid (the agent's output)
    output: str
    verdicts: list[Verdict] = field(default_factory=list)
    trace_id: str | None = None

    @property
    def passed(self) -> int:
        return sum(v.status == "scored" and (v.score or 0) >= 1 for v in self.verdicts)

    @property
    def unscored(self) -> int:
        return sum(v.status != "scored" for v in self.verdicts)

    def value(self, name: str) -> Any:
        return {"instance": self.instance_id, "repeat": self.repeat, "user": self.user, "group": self.group,
                "score": self.score, "status": self.status, "verdicts": len(self.verdicts), "passed": self.passed,
                "unscored": self.unscored, "trace": self.trace_id or "", "output": self.output}[name]


FIELDS = ("instance", "repeat", "user", "group", "score", "status", "verdicts", "passed", "unscored", "trace",
          "output")
NUMERIC = {"repeat", "score", "verdicts", "passed", "unscored"}


def _read(client: MlflowClient, run_id: str, folder: str, cls: type) -> list[Any]:
    files = [f.path for f in client.list_artifacts(run_id, folder) if f.path.endswith(".parquet")]
    if not files:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(client.download_artifacts(run_id, folder, tmp))
        table = pa.concat_tables([pq.read_table(p) for p in sorted(local.glob("*.parquet"))])
    return from_table(table, cls)


def _status(output: AgentOutput, score: float | None, verdicts: list[Verdict]) -> str:
    if output.status != "ok":
        return output.status
    if score is not None:
        return "scored"
    if not verdicts:
        return "not_judged"
    return "judge_failed" if any(v.status == "failed" for v in verdicts) else "unscored"


def clip_text(text: str, limit: int = TEXT_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def trace_index(client: MlflowClient, experiment_id: str, judge: str,
                score_key: str) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(instance_id, repeat) -> (trace id, user, group) of the traces a cell's judge judged under its score key,
    from the store `client` reads (never the process's global tracking URI)."""
    out: dict[tuple[str, int], tuple[str, str, str]] = {}
    token = None
    while score_key:
        page = client.search_traces(locations=[experiment_id], filter_string=cell_filter(judge, score_key),
                                    include_spans=False, max_results=500, page_token=token)
        for t in page:
            tags = t.info.tags
            out[(tags[TAG + "instance_id"], int(tags.get(TAG + "repeat", 0)))] = (
                t.info.trace_id, tags.get(TAG + "user_id", ""), tags.get(TAG + "group", ""))
        token = page.token
        if not token:
            break
    return out


def read_samples(client: MlflowClient, run: Any) -> list[Sample]:
    """Every agent output of the cell's child run with its score, verdicts and trace id."""
    quiet_artifacts()
    run_id, tags = run.info.run_id, run.data.tags
    outputs = _read(client, run_id, "parquet/run", AgentOutput)
    judgments = _read(client, run_id, "parquet/judge", Judgment)
    scores = _read(client, run_id, "parquet/score", InstanceScore)
    metric = tags.get(TAG + "headline_metric", "")
    own = next((s.metric for s in scores if mlflow_key(s.metric) == metric), metric)
    values: dict[tuple[str, int], list[float]] = {}
    who: dict[str, tuple[str, str]] = {}
    for s in scores:
        who[s.instance_id] = (s.user_id, s.group)
        if s.metric == own and s.value is not None:
            values.setdefault((s.instance_id, s.repeat), []).append(s.value)
    verdicts: dict[tuple[str, int], list[Verdict]] = {}
    for j in judgments:
        verdicts.setdefault((j.instance_id, j.repeat), []).append(Verdict.of(j))
    traces = trace_index(client, run.info.experiment_id, tags.get(TAG + "judge", ""), tags.get(TAG + "score_key", ""))
    out = []
    for o in outputs:
        key = (o.instance_id, o.repeat)
        vs = values.get(key)
        score = sum(vs) / len(vs) if vs else None
        trace_id, user, group = traces.get(key, (None, "", ""))
        user, group = who.get(o.instance_id, (user, group))  # the score's user: the cluster its interval resamples
        out.append(_sample(o, user, group, score, verdicts.get(key, []), trace_id))
    return sorted(out, key=lambda s: (s.instance_id, s.repeat))


def _sample(o: AgentOutput, user: str, group: str, score: float | None, verdicts: list[Verdict],
            trace_id: str | None) -> Sample:
    mine = sorted(verdicts, key=lambda v: (v.kind, v.item_id, v.judge_repeat))
    return Sample(o.instance_id, o.repeat, user, group, score, _status(o, score, mine), o.text, mine, trace_id)


def local_samples(outcomes: dict[tuple[str, int], Outcome], ids: dict[tuple[str, int], str]) -> list[Sample]:
    """The samples of a cell from the records the track stage holds (traces.outcomes) and the trace ids it
    wrote or found: what read_samples reads back from MLflow, without the artifact downloads."""
    out = [_sample(o.output, o.cluster or cluster_of(o.instance), o.instance.group, o.score,
                   [Verdict.of(j) for j in o.judgments], ids.get(key)) for key, o in outcomes.items()]
    return sorted(out, key=lambda s: (s.instance_id, s.repeat))


# ---- choosing and ordering -------------------------------------------------------------------------------------

OPS: dict[str, Callable[[Any, Any], bool]] = {"<=": operator.le, ">=": operator.ge, "!=": operator.ne,
                                              "=": operator.eq, "<": operator.lt, ">": operator.gt,
                                              "~": lambda a, b: str(b).lower() in str(a).lower()}


def parse_where(expr: str) -> Callable[[Sample], bool]:
    """`score<50`, `status=unscored`, `user=u3`, `output~vegetarian`, `score=none`: ValueError when the field
    or the value cannot be read (before anything is printed)."""
    for sym in OPS:  # two-character operators first (the dict's order)
        name, found, value = expr.partition(sym)
        if found:
            break
    else:
        raise ValueError(f"--where {expr!r}: write FIELD OP VALUE with OP one of {' '.join(OPS)} (e.g. score<50)")
    name, value = name.strip(), value.strip()
    if name not in FIELDS:
        raise ValueError(f"--where {expr!r}: no field {name!r}; the fields: {', '.join(FIELDS)}")
    op = OPS[sym]
    if name in NUMERIC and value.lower() not in ("none", "") and sym != "~":
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"--where {expr!r}: {name} is a number, {value!r} is not") from None
        return lambda s: s.value(name) is not None and op(float(s.value(name)), number)
    if value.lower() == "none" and name in NUMERIC:
        return lambda s: (s.value(name) is None) == (sym == "=")
    return lambda s: op(str(s.value(name)), value)


def sort_key(spec: str) -> tuple[str, bool]:
    """`score` / `-score` -> (field, descending); ValueError naming the fields."""
    name, desc = (spec[1:], True) if spec.startswith("-") else (spec, False)
    if name not in FIELDS:
        raise ValueError(f"--sort {spec!r}: no field {name!r}; the fields: {', '.join(FIELDS)}")
    return name, desc


def choose(samples: list[Sample], where: Sequence[str] = (), sort: str | None = None,
           limit: int | None = None) -> list[Sample]:
    """The samples that pass every `where`, ordered by `sort` (a missing score last either way), at most `limit`."""
    tests = [parse_where(w) for w in where]
    kept = [s for s in samples if all(t(s) for t in tests)]
    if sort:
        name, desc = sort_key(sort)
        present = [s for s in kept if s.value(name) is not None]
        present.sort(key=lambda s: s.value(name), reverse=desc)
        kept = present + [s for s in kept if s.value(name) is None]
    return kept[:limit] if limit else kept


# ---- two cells side by side ---------------------------------------------------------------------------------

@dataclass
class PairRow:
    instance_id: str
    repeat: int
    user: str
    a: Sample
    b: Sample

    @property
    def gap(self) -> float:
        if (self.a.score is None) != (self.b.score is None):
            return math.inf  # scored in one cell only: the largest difference there is
        return abs((self.a.score or 0.0) - (self.b.score or 0.0))


def side_by_side(a: list[Sample], b: list[Sample]) -> list[PairRow]:
    """The instances both cells hold, those that differ most first (ties by id)."""
    theirs = {(s.instance_id, s.repeat): s for s in b}
    rows = [PairRow(s.instance_id, s.repeat, s.user, s, theirs[(s.instance_id, s.repeat)])
            for s in a if (s.instance_id, s.repeat) in theirs]
    rows.sort(key=lambda r: (-r.gap, r.instance_id, r.repeat))
    return rows


# ---- as a page ----------------------------------------------------------------------------------------------

def samples_html(title: str, samples: list[Sample], ui: str, experiment_id: str) -> str:
    """One cell's samples as a self-contained HTML page: a sortable table (click a header) with every verdict
    and rationale, and a link to each trace in the MLflow UI."""
    from html import escape

    def verdicts(s: Sample) -> str:
        return "<br>".join(f"{v.mark()} {escape(v.kind)}/{escape(v.item_id)}"
                           f"{'#' + str(v.judge_repeat) if v.judge_repeat else ''}: "
                           f"{escape(clip_text(v.rationale or v.raw, 2000))}" for v in s.verdicts)

    rows = []
    for s in samples:
        link = f'<a href="{escape(trace_url(ui, experiment_id, s.trace_id))}">{escape(s.trace_id)}</a>' \
            if s.trace_id else ""
        score = "" if s.score is None else f"{s.score:.1f}"
        rows.append(f"<tr><td>{escape(s.instance_id)}</td><td>{s.repeat}</td><td>{escape(s.user)}</td>"
                    f"<td>{escape(s.group)}</td><td>{score}</td><td>{escape(s.status)}</td>"
                    f"<td>{verdicts(s)}</td><td>{escape(clip_text(s.output, 2000))}</td><td>{link}</td></tr>")
    head = "".join(f"<th onclick='sortBy({k})'>{h}</th>" for k, h in enumerate(
        ("instance", "repeat", "user", "group", "score", "status", "verdicts (rationale)", "output", "trace")))
    return (f"<!doctype html><meta charset='utf-8'><title>{escape(title)}</title>"
            "<style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:4px;vertical-align:top}"
            "th{cursor:pointer;background:#eee}table{border-collapse:collapse}</style>"
            f"<h1>{escape(title)}</h1><p>{len(samples)} instance(s); ✓ pass, ✗ fail, ? unscored, ! failed; "
            f"texts clipped to 2,000 characters</p><table id='t'><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table><script>function sortBy(k){const b=document.querySelector('#t tbody');"
            "const rs=[...b.rows];const num=r=>parseFloat(r.cells[k].innerText);const asc=b.dataset.k!=k;"
            "rs.sort((x,y)=>{const a=num(x),c=num(y);const v=isNaN(a)||isNaN(c)?x.cells[k].innerText.localeCompare("
            "y.cells[k].innerText):a-c;return asc?v:-v});b.dataset.k=asc?k:'';rs.forEach(r=>b.appendChild(r))}"
            "</script>")


PAGE = "samples.html"  # each child run's artifact: its instances as `perseval samples --html` writes them


def log_samples_pages(client: MlflowClient, runs: Iterable[RunTraces], experiment_id: str) -> None:
    """Each cell's samples page as an artifact of its child run, written once its traces are (the page links
    them), from the records the track stage holds. The links are root-relative, so they open in the UI that
    shows the artifact, wherever it runs."""
    for traced in runs:
        for (cell, run_id, _), outcomes in zip(traced.cells, traced.outcomes):
            page = samples_html(cell.name, local_samples(outcomes, traced.ids), "", experiment_id)
            client.log_text(run_id, page, PAGE)

