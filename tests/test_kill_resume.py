"""Crash safety (issue 9): `perseval run` is killed with SIGKILL (its whole process group, no cleanup) at four
points, found by polling the output root, never by sleeping: (1) while the index is built, (2) mid run-stage
(some run parts written, not all), (3) mid judge-stage, (4) while MLflow tracks (the score outputs exist).
The same command is then run to completion, and must end with the reference run's headline scores and row
counts, without sending again any request the killed run had completed (their request captures compared by a
hash of model, messages, sampling, response_format and tools), and with no process of either run left.

A point the run went past before it was seen is retried with an earlier trigger; one never reached fails the
test. Points (2)-(4) start from the reference's construct and index outputs (copied, as a second run of the
same experiment would find them) to stay within a few minutes on two cores."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil
import pyarrow.parquet as pq
import pytest
import yaml

from perseval.core.hashing import content_key
from perseval.retrieval.base import OWNERS_DIR
from perseval.pipeline.stages import data_manifest
from perseval.core.store import StageStore

from .cli_runs import (EXP, MODEL, cli_run, finish, headline_scores, listening, plan_keys,  # noqa: F401 (fixtures)
                       reference, workdir)

pytestmark = pytest.mark.integration

AGENT = {"name": "iba-rag-kill", "kind": "rag",  # retrieves from the index, so the plan has an index stage
         "params": {"top_k": 2, "max_tokens": 48, "json_max_tokens": 64, "passage_chars": 300}}
STAGES = ("data", "documents", "index", "run", "judge", "score")  # every stage whose rows a resumed run must match
SAMPLING = ("temperature", "top_p", "max_tokens", "seed")


@pytest.fixture(scope="module")
def experiment(workdir) -> str:
    cfg = workdir / "configs"
    (cfg / "agents" / f"{AGENT['name']}.yaml").write_text(yaml.safe_dump(AGENT))
    bench = {**EXP["benchmarks"][0], "agents": [AGENT["name"]]}
    exp = {**EXP, "name": "killres", "benchmarks": [bench], "mlflow": {**EXP["mlflow"], "experiment": "killres"}}
    (cfg / "experiments" / "killres.yaml").write_text(yaml.safe_dump(exp))
    return "killres"


@dataclass
class Point:
    name: str
    seeded: tuple[str, ...]  # stage folders copied from the reference before the killed run starts
    triggers: list[tuple[str, Callable[[Path], bool]]]  # (what, reached?) the first, then earlier ones
    past: Callable[[Path], bool]  # the run went past the point without it being seen


@dataclass
class Outcome:
    name: str
    trigger: str = "never reached"
    sent_ok: int = 0  # requests the killed run completed
    repeated: int = 0  # of those, sent again by the resumed run
    resumed_sent: int = 0  # every request the resumed run sent
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # triggers the run went past (retried earlier): reported


def _parts(root: Path, stage: str, key: str) -> int:
    return len(StageStore(root, stage, key).parts())


def _points(workdir: Path, experiment: str, ref: Path) -> list[Point]:
    plan, run, judged = plan_keys(workdir, experiment)
    [data], [index] = plan.data, plan.index
    n = len(data_manifest(str(ref), data.key, EXP["shard_size"]).shard_ids)
    assert n >= 2, n  # "some parts, not all" needs several
    art = workdir / EXP["mlflow"]["artifact_root"] / "killres"

    def building(root: Path) -> bool:
        return (root / "index" / index.key / OWNERS_DIR).is_dir() and not _done(root, "index", index.key)

    def tracked_before() -> set[str]:
        return {p.name for p in art.iterdir()} if art.is_dir() else set()

    before: dict[str, set[str]] = {}

    def tracking(root: Path) -> bool:  # a parent run's artifact folder this run made
        seen = before.setdefault(str(root), tracked_before())
        return bool(tracked_before() - seen)

    return [
        Point("index", (), [("index folder made, no manifest", building),
                            ("documents complete, index not", lambda r: _done(r, "documents", data.key)
                             and not _done(r, "index", index.key))],
              lambda r: _done(r, "index", index.key)),
        Point("run", ("data", "documents", "index"),
              [(f"1..{n - 1} of {n} run parts", lambda r: 0 < _parts(r, "run", run.key) < n),
               ("model server log, no run part", lambda r: bool(list((r / "logs").glob(f"{MODEL}-*.log")))
                and _parts(r, "run", run.key) == 0)],
              lambda r: _parts(r, "run", run.key) >= n),
        Point("judge", ("data", "documents", "index"),
              [(f"1..{n - 1} of {n} judge parts", lambda r: 0 < _parts(r, "judge", judged.key) < n),
               (f"{n} run parts, no judge part", lambda r: _parts(r, "run", run.key) >= n
                and _parts(r, "judge", judged.key) == 0)],
              lambda r: _parts(r, "judge", judged.key) >= n),
        Point("track", ("data", "documents", "index"),
              [("a new MLflow artifact folder", tracking),
               ("every score output complete", lambda r: all(_done(r, "score", c.key) for c in plan.cells))],
              lambda r: False),
    ]


def _done(root: Path, stage: str, key: str) -> bool:
    return StageStore(root, stage, key).is_complete()


def _family(proc: subprocess.Popen) -> set[psutil.Process]:
    """Every process `proc` started (Dask workers, server guards and servers), while it runs."""
    try:
        return set(psutil.Process(proc.pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return set()


def _alive(procs: set[psutil.Process], wait_s: float = 30) -> list[str]:
    """The processes of `procs` still running after up to `wait_s` seconds (a guard needs a moment)."""
    def running() -> list[psutil.Process]:
        out = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    end = time.monotonic() + wait_s
    while running() and time.monotonic() < end:
        time.sleep(0.3)
    return [f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in running()]


def _ports_listening(root: Path) -> list[int]:
    ports = [int(p.stem.rsplit("-", 1)[1]) for p in (root / "logs").glob(f"{MODEL}-*.log")]
    return [port for port in ports if listening(port)]


def _kill_at(proc: subprocess.Popen, reached: Callable[[Path], bool], past: Callable[[Path], bool],
             root: Path) -> tuple[bool, set[psutil.Process]]:
    """SIGKILL the process group of `proc` as soon as `reached(root)`; (killed?, every process it had started).
    If the run ends or goes `past` first, it is killed all the same, and (False, ...) says the point was missed."""
    family: set[psutil.Process] = set()
    last = 0.0
    hit = False
    while proc.poll() is None:
        if time.monotonic() - last > 0.5:  # the process table is costly to walk on two cores
            family |= _family(proc)
            last = time.monotonic()
        hit = reached(root)
        if hit or past(root):
            family |= _family(proc)
            break
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)
    return hit, family


def _run_to_end(proc: subprocess.Popen, workdir: Path, tag: str) -> tuple[int, dict, str, set[psutil.Process]]:
    family: set[psutil.Process] = set()
    while proc.poll() is None:
        family |= _family(proc)
        time.sleep(1)
    rc, summary, out = finish(proc, workdir, tag)
    return rc, summary, out, family


def _request_hash(rec: dict) -> str:
    return content_key(rec["model"], rec["messages"], {k: rec.get(k) for k in SAMPLING}, rec.get("response_format"),
                       rec.get("tools"), length=40)


def _captured(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _rows(root: Path) -> dict[str, int]:
    """stage/key -> rows, reading every Parquet file in full (a half-written one would fail here)."""
    out = {}
    for stage in STAGES:
        for d in sorted((root / stage).iterdir()) if (root / stage).is_dir() else []:
            files = [p for p in sorted(d.rglob("*.parquet")) if not p.name.startswith(".tmp-")]
            out[f"{stage}/{d.name}"] = sum(pq.read_table(p).num_rows for p in files)
    return out


def _cmd(workdir: Path, api: str, root: Path, tag: str, capture: Path) -> subprocess.Popen:
    return cli_run(workdir, api, root, tag, experiment="killres", new_session=True,
                   env_extra={"PERSEVAL_CAPTURE_REQUESTS": str(capture)})


def _killed_run(workdir: Path, api: str, point: Point, result: Outcome) -> str | None:
    """Kill a fresh run at the point, trying its triggers in turn; the run's tag, or None if none was reached."""
    for attempt, (what, reached) in enumerate(point.triggers):
        tag = f"kill-{point.name}-{attempt}"
        root = workdir / tag
        for stage in point.seeded:  # copy2 keeps mtimes, so the copies are as fresh as in the reference
            shutil.copytree(workdir / "reference" / stage, root / stage)
        hit, family = _kill_at(_cmd(workdir, api, root, f"{tag}-1", workdir / f"{tag}-killed.jsonl"), reached,
                               point.past, root)
        result.problems += [f"killed run left {p}" for p in _alive(family)]
        result.problems += [f"killed run's server still listens on {p}" for p in _ports_listening(root)]
        if hit:
            result.trigger = what
            return tag
        result.notes.append(f"trigger {what!r} missed (the run went past it)")
    result.problems.append("no trigger reached")
    return None


def _resumed_run(workdir: Path, api: str, reference: dict, tag: str, result: Outcome) -> None:
    """Run the killed run's command to the end and check it against the reference and the killed run."""
    root, capture = workdir / tag, workdir / f"{tag}-resumed.jsonl"
    rc, summary, out, family = _run_to_end(_cmd(workdir, api, root, f"{tag}-2", capture), workdir, f"{tag}-2")
    if rc != 0:
        result.problems.append(f"resumed run exited {rc}: {out[-2000:]}")
        return
    result.problems += [f"resumed run left {p}" for p in _alive(family)]
    result.problems += [f"a server still listens on {p}" for p in _ports_listening(root)]
    if headline_scores(summary) != headline_scores(reference):
        result.problems.append(f"scores {headline_scores(summary)} != reference {headline_scores(reference)}")
    if (rows := _rows(root)) != (want := _rows(workdir / "reference")):
        result.problems.append(f"rows {rows} != reference {want}")
    done = {_request_hash(r) for r in _captured(workdir / f"{tag}-killed.jsonl") if r["status"] == "ok"}
    sent = _captured(capture)
    again = [r for r in sent if _request_hash(r) in done]
    result.sent_ok, result.repeated, result.resumed_sent = len(done), len(again), len(sent)
    if again:
        result.problems.append(f"{len(again)} requests sent again, stages {sorted({r['stage'] for r in again})}")


def _kill_and_resume(workdir: Path, api: str, reference: dict, point: Point) -> Outcome:
    result = Outcome(point.name)
    tag = _killed_run(workdir, api, point, result)
    if tag is not None:
        _resumed_run(workdir, api, reference, tag, result)
    return result


def test_kill_9_at_each_stage_resumes_to_the_reference_without_repeating_a_request(workdir, prefect_api,
                                                                                   experiment, reference, capsys):
    outcomes = [_kill_and_resume(workdir, prefect_api, reference, p)
                for p in _points(workdir, experiment, workdir / "reference")]
    survived = [o for o in outcomes if not o.problems]
    repeated, sent = sum(o.repeated for o in outcomes), sum(o.sent_ok for o in outcomes)
    lines = [f"kills survived {len(survived)}/{len(outcomes)}, requests repeated {repeated} of {sent}"]
    lines += [f"  {o.name}: killed at {o.trigger!r} {o.notes}, {o.repeated} of {o.sent_ok} repeated, "
              f"{o.resumed_sent} sent on resuming (reference: {reference['llm_requests']}); {o.problems or 'ok'}"
              for o in outcomes]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert len(survived) == len(outcomes) and repeated == 0, "\n".join(lines)
