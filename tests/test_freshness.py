"""Re-runs redo exactly what a change or a failure reaches: content keys plus make's newer-than rule,
decided once per unit by perseval.pipeline.freshness, top-down, so a redone input redoes what is made from it."""
import os
import time

from perseval.experiment.load import load_experiment
from perseval.pipeline.freshness import part_final, pending
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput, InstanceScore, Judgment
from perseval.core.store import StageStore

from .conftest import CONFIGS


def _outputs(status: str) -> list[AgentOutput]:
    return [AgentOutput("i1", "a", 0, "text", status=status)]


def _touch_later(path, seconds: float = 5):
    later = time.time() + seconds
    os.utime(path, (later, later))


def test_a_part_with_failures_is_not_final(tmp_path):
    run = StageStore(tmp_path, "run", "r")
    run.write_records(0, _outputs("failed"), AgentOutput)
    assert not part_final(str(tmp_path), "run", "r", 0)
    run.write_records(0, _outputs("invalid"), AgentOutput)  # the agent's fault: final, kept
    assert part_final(str(tmp_path), "run", "r", 0)
    run.part_path(0).write_bytes(b"PAR1 truncated")  # unreadable: redone, never read as data
    assert not part_final(str(tmp_path), "run", "r", 0)


def _finish(root: str, plan) -> None:
    """Write every run, judge, score and analysis output of a one-shard plan, in stage order."""
    for run in plan.runs():
        StageStore(root, "run", run.key).write_records(0, _outputs("ok"), AgentOutput)
    for judged in plan.judgings():
        StageStore(root, "judge", judged.key).write_records(
            0, [Judgment("i1", "a", 0, judged.judge.name, 0, "c", "checkpoint", 1.0)], Judgment)
    for cell in plan.cells:
        store = StageStore(root, "score", cell.key)
        store.write_records(0, [InstanceScore("i1", "a", 0, "j", 0, "g", "score", 1.0)], InstanceScore)
        store.mark_complete({})
    for unit in plan.analyses:
        StageStore(root, "analysis", unit.key).mark_complete({"files": []})


def test_pending_propagates_from_a_redone_run_part_to_its_judges_scores_and_analysis(tmp_path):
    root = str(tmp_path)
    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    one_shard = {d.key: [0] for d in plan.data}
    assert pending(root, plan, one_shard).models(plan) == {"smollm2-135m"}
    _finish(root, plan)
    done = pending(root, plan, one_shard)
    assert (done.runs, done.judges, done.scores, done.analyses) == (set(), set(), set(), set())
    assert done.models(plan) == set()  # nothing pending: no model is served

    rag = next(r for r in plan.runs() if r.agent.name == "iba-rag")
    StageStore(root, "run", rag.key).write_records(0, _outputs("failed"), AgentOutput)
    todo = pending(root, plan, one_shard)
    judged = {j.key for j in plan.judgings() if j.run.key == rag.key}
    assert todo.runs == {(rag.key, 0)} and {k for k, _ in todo.judges} == judged
    assert todo.scores == {c.key for c in plan.cells if c.run.key == rag.key}
    assert todo.analyses == {a.key for a in plan.analyses if a.data.entry.name == "iba"}
    assert todo.models(plan) == {"smollm2-135m"}  # the backbone, and the judge model of the judge units

    _finish(root, plan)
    oracle_judge = next(j for j in plan.judgings() if j.run.agent.name == "apeb-oracle")
    _touch_later(StageStore(root, "run", oracle_judge.run.key).part_path(0))  # a run part newer than its judgments
    todo = pending(root, plan, one_shard)
    assert todo.runs == set() and {k for k, _ in todo.judges} == {oracle_judge.key}
    assert todo.models(plan) == set()  # a rule judge needs no model


def test_a_score_goes_stale_when_a_judge_part_changes(tmp_path):
    root = str(tmp_path)
    plan = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    one_shard = {d.key: [0] for d in plan.data}
    _finish(root, plan)
    cell = plan.cells[0]
    _touch_later(StageStore(root, "judge", cell.judged.key).part_path(0))
    todo = pending(root, plan, one_shard)
    assert todo.judges == set() and cell.key in todo.scores
