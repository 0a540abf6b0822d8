"""From a score to its instances (`perseval samples`), rendered from the run record and its per-sample log:
each instance of a cell with its user, score and status, the first lines of its prompt, its answer, each
verdict with the judge's reason, and a link that opens its trace in `perseval ui`; as a table, JSON or a
sortable HTML page. With no cell named, the run's cells. Two cells side by side (`compare --between`): their
shared instances, those that differ most first, with both scores and trace ids.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from html import escape as html_escape
from typing import Any, Callable, Iterable, Optional, Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from perseval.report.record import CellRecord, InstanceRecord, RunRecord, Verdict
from perseval.report.views.text import score_text, status_short, users_text

UI = "http://127.0.0.1:5000"  # where `perseval ui` serves by default
TEXT_CHARS = 300  # an answer or a reason as the terminal shows it (the HTML and the trace hold 2,000)
PROMPT_LINES = 3


def trace_url(ui: str, experiment_id: str, trace_id: str) -> str:
    """Where the MLflow UI (3.x) opens one trace: the experiment's Traces tab with the trace selected."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}"


def clip_text(text: Optional[str], limit: int = TEXT_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def mark(v: Verdict) -> str:
    if v.status != "scored" or v.score is None:
        return "?" if v.status == "unscored" else "!"
    return "✓" if v.score >= 1 else "✗" if v.score <= 0 else f"{v.score:g}"


@dataclass
class Sample:
    """One (instance, repeat) of a cell: as the record holds it, with its line of the per-sample log."""

    instance: InstanceRecord
    line: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return str(self.line.get("answer") or "")

    @property
    def prompt(self) -> str:
        """The first lines of the last message the agent's final request sent (its task, as the model saw it)."""
        messages = self.line.get("messages") or []
        last = next((m for m in reversed(messages) if m.get("role") == "user"), messages[-1] if messages else None)
        content = last.get("content") if isinstance(last, dict) else None
        if not isinstance(content, str):
            return ""
        lines = [ln for ln in content.splitlines() if ln.strip()]
        return "\n".join(clip_text(ln, 160) for ln in lines[:PROMPT_LINES]) + (" …" if len(lines) > PROMPT_LINES else "")

    @property
    def passed(self) -> int:
        return sum(v.status == "scored" and (v.score or 0) >= 1 for v in self.instance.verdicts)

    @property
    def unscored(self) -> int:
        return sum(v.status != "scored" for v in self.instance.verdicts)

    def value(self, name: str) -> Any:
        i = self.instance
        return {"instance": i.instance_id, "repeat": i.repeat, "user": i.user, "group": i.group, "score": i.score,
                "status": i.status, "verdicts": len(i.verdicts), "passed": self.passed, "unscored": self.unscored,
                "trace": i.trace_id or "", "output": self.answer}[name]


FIELDS = ("instance", "repeat", "user", "group", "score", "status", "verdicts", "passed", "unscored", "trace",
          "output")
NUMERIC = {"repeat", "score", "verdicts", "passed", "unscored"}


def samples_of(record: RunRecord, cell: CellRecord, lines: Iterable[dict[str, Any]]) -> list[Sample]:
    """The cell's instances in the record's order, each with its per-sample log line (where there is one)."""
    mine = {(ln["instance_id"], ln["repeat"]): ln for ln in lines if ln.get("cell_key") == cell.key}
    return [Sample(i, mine.get((i.instance_id, i.repeat), {})) for i in record.cell_instances(cell.key)]


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


# ---- the terminal ---------------------------------------------------------------------------------------------

def _verdicts(s: Sample, brief: bool) -> str:
    vs = s.instance.verdicts
    if brief:
        return " ".join(f"{mark(v)}{v.item_id}" for v in vs)
    return "\n".join(f"{mark(v)} {v.kind}/{v.item_id}{'#' + str(v.judge_repeat) if v.judge_repeat else ''}"
                     + (f" p={v.p_true:.2f}" if v.p_true is not None else "")
                     + (f": {clip_text(v.rationale, 160)}" if v.rationale else "") for v in vs)


def _score(i: InstanceRecord) -> str:
    return "-" if i.score is None else f"{i.score:.1f}"


def samples_table(title: str, samples: Sequence[Sample], brief: bool = False) -> Table:
    """One cell's instances: instance, user, score, status, and what happened (the prompt's first lines, the
    answer, each verdict with its reason; `brief`: verdict marks only)."""
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  show_lines=not brief)
    table.add_column("instance", no_wrap=True)
    table.add_column("user", overflow="fold")
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("status", overflow="fold")
    table.add_column("verdicts" if brief else "prompt / answer / verdicts", overflow="fold", ratio=1)
    for s in samples:
        i = s.instance
        what = _verdicts(s, brief) if brief else "\n".join(p for p in (
            f"prompt: {s.prompt}" if s.prompt else "", f"answer: {clip_text(s.answer)}", _verdicts(s, False)) if p)
        table.add_row(*map(Text, (i.instance_id + (f"#{i.repeat}" if i.repeat else ""), i.user, _score(i), i.status,
                                  what)))
    return table


def trace_lines(samples: Sequence[Sample], ui: str, experiment_id: str) -> list[str]:
    """One line per instance with a trace: where `perseval ui` opens it."""
    return [f"{s.instance.instance_id}{'#' + str(s.instance.repeat) if s.instance.repeat else ''}: "
            f"{trace_url(ui, experiment_id, s.instance.trace_id)}" for s in samples if s.instance.trace_id]


def cells_table(record: RunRecord, title: str) -> Table:
    """The run's cells (what `perseval samples RUN` lists), control cells under their plain cell."""
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for label, justify in (("cell", "left"), ("benchmark", "left"), ("score [CI]", "right"), ("users/n", "right"),
                           ("status", "left")):
        table.add_column(label, justify=justify, no_wrap=label != "status")  # type: ignore[arg-type]
    for c in record.cells:
        table.add_row(*map(Text, (c.label, c.parts.benchmark, score_text(c), users_text(c), status_short(c))))
    return table


# ---- as a page ----------------------------------------------------------------------------------------------

def samples_html(cell: CellRecord, instances: Sequence[InstanceRecord], answers: dict[tuple[str, int], str], ui: str,
                 experiment_id: str) -> str:
    """One cell's instances as a self-contained HTML page: a sortable table (click a header) with every verdict
    and reason, the answer, and a link to each trace in the MLflow UI."""
    def verdicts(i: InstanceRecord) -> str:
        return "<br>".join(f"{mark(v)} {html_escape(v.kind)}/{html_escape(v.item_id)}"
                           f"{'#' + str(v.judge_repeat) if v.judge_repeat else ''}: "
                           f"{html_escape(clip_text(v.rationale, 2000))}" for v in i.verdicts)

    rows = []
    for i in instances:
        link = f'<a href="{html_escape(trace_url(ui, experiment_id, i.trace_id))}">{html_escape(i.trace_id)}</a>' \
            if i.trace_id else ""
        answer = answers.get((i.instance_id, i.repeat), "")
        rows.append(f"<tr><td>{html_escape(i.instance_id)}</td><td>{i.repeat}</td><td>{html_escape(i.user)}</td>"
                    f"<td>{html_escape(i.group)}</td><td>{'' if i.score is None else f'{i.score:.1f}'}</td><td>{html_escape(i.status)}"
                    f"</td><td>{verdicts(i)}</td><td>{html_escape(clip_text(answer, 2000))}</td><td>{link}</td></tr>")
    head = "".join(f"<th onclick='sortBy({k})'>{h}</th>" for k, h in enumerate(
        ("instance", "repeat", "user", "group", "score", "status", "verdicts (reason)", "answer", "trace")))
    title = f"{cell.label} ({cell.name})"
    return (f"<!doctype html><meta charset='utf-8'><title>{html_escape(title)}</title>"
            "<style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:4px;vertical-align:top}"
            "th{cursor:pointer;background:#eee}table{border-collapse:collapse}</style>"
            f"<h1>{html_escape(title)}</h1><p>score {html_escape(score_text(cell))}, users/n "
            f"{html_escape(users_text(cell))}; {len(instances)} instance(s); ✓ pass, ✗ fail, ? unscored, ! failed; "
            f"texts clipped to 2,000 characters</p><table id='t'><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table><script>function sortBy(k){const b=document.querySelector('#t tbody');"
            "const rs=[...b.rows];const num=r=>parseFloat(r.cells[k].innerText);const asc=b.dataset.k!=k;"
            "rs.sort((x,y)=>{const a=num(x),c=num(y);const v=isNaN(a)||isNaN(c)?x.cells[k].innerText.localeCompare("
            "y.cells[k].innerText):a-c;return asc?v:-v});b.dataset.k=asc?k:'';rs.forEach(r=>b.appendChild(r))}"
            "</script>")


# ---- two cells side by side ---------------------------------------------------------------------------------

@dataclass
class PairRow:
    instance_id: str
    repeat: int
    user: str
    a: InstanceRecord
    b: InstanceRecord

    @property
    def gap(self) -> float:
        if (self.a.score is None) != (self.b.score is None):
            return math.inf  # scored in one cell only: the largest difference there is
        return abs((self.a.score or 0.0) - (self.b.score or 0.0))


def side_by_side(a: Sequence[InstanceRecord], b: Sequence[InstanceRecord]) -> list[PairRow]:
    """The instances both cells hold, those that differ most first (ties by id)."""
    theirs = {(i.instance_id, i.repeat): i for i in b}
    rows = [PairRow(i.instance_id, i.repeat, i.user, i, theirs[(i.instance_id, i.repeat)])
            for i in a if (i.instance_id, i.repeat) in theirs]
    rows.sort(key=lambda r: (-r.gap, r.instance_id, r.repeat))
    return rows


def pair_table(title: str, rows: Sequence[PairRow]) -> Table:
    """Two cells' instances side by side: both scores and both trace ids."""
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for label in ("instance", "user", "score A", "score B", "trace A", "trace B"):
        table.add_column(label, justify="right" if label.startswith("score") else "left",
                         no_wrap=label.startswith("trace") or label == "instance")
    for r in rows:
        table.add_row(*map(Text, (r.instance_id + (f"#{r.repeat}" if r.repeat else ""), r.user, _pair_score(r.a),
                                  _pair_score(r.b), r.a.trace_id or "-", r.b.trace_id or "-")))
    return table


def _pair_score(i: InstanceRecord) -> str:
    return f"{i.score:.1f}" if i.score is not None else i.status
