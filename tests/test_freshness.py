"""Re-runs redo exactly what a change or a failure reaches: content keys plus make's newer-than rule."""
import os
import time

from perseval import stages
from perseval.records import AgentOutput, Judgment
from perseval.store import StageStore


def _outputs(status: str) -> list[AgentOutput]:
    return [AgentOutput("i1", "a", 0, "text", status=status)]


def _judgments() -> list[Judgment]:
    return [Judgment("i1", "a", 0, "j", 0, "c1", "checkpoint", 1.0)]


def _touch_later(path):
    later = time.time() + 5
    os.utime(path, (later, later))


def test_a_part_with_failures_is_not_done(tmp_path):
    run = StageStore(tmp_path, "run", "r")
    run.write_records(0, _outputs("failed"), AgentOutput)
    assert not stages.run_done(str(tmp_path), "r", 0)
    run.write_records(0, _outputs("invalid"), AgentOutput)  # the agent's fault: final, kept
    assert stages.run_done(str(tmp_path), "r", 0)


def test_judgments_go_stale_when_their_run_part_is_redone(tmp_path):
    root = str(tmp_path)
    run, judge = StageStore(root, "run", "r"), StageStore(root, "judge", "j")
    run.write_records(0, _outputs("ok"), AgentOutput)
    judge.write_records(0, _judgments(), Judgment)
    assert stages.judge_done(root, "j", "r", 0)
    run.write_records(0, _outputs("ok"), AgentOutput)
    _touch_later(run.part_path(0))
    assert not stages.judge_done(root, "j", "r", 0)


def test_score_goes_stale_when_a_judge_part_changes(tmp_path):
    root = str(tmp_path)
    StageStore(root, "run", "r").write_records(0, _outputs("ok"), AgentOutput)
    judge = StageStore(root, "judge", "j")
    judge.write_records(0, _judgments(), Judgment)
    score = StageStore(root, "score", "s")
    score.mark_complete({})
    assert stages.score_done(root, "s", "r", "j")
    _touch_later(judge.part_path(0))
    assert not stages.score_done(root, "s", "r", "j")
