"""Rule scoring of CallAPI slots and the instance-level aggregate."""
from __future__ import annotations

import re
from typing import Any

from perseval.parsing import extract_object
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment

_SEP = re.compile(r"[\s\-]+")


def normalize_slot(value: Any) -> str:
    """Case, surrounding quotes/space and space-vs-hyphen-vs-underscore do not matter."""
    text = str(value).strip().strip("'\"").strip().lower()
    return _SEP.sub("_", text)


def canonical_slot(value: Any, allowed: list[str]) -> Any:
    """The allowed value `value` normalizes to, else `value` unchanged (the scorer then gives 0)."""
    norm = normalize_slot(value)
    for a in allowed:
        if normalize_slot(a) == norm:
            return a
    return value


def output_slots(output: AgentOutput) -> dict[str, Any] | None:
    """The submitted API parameters: `parsed`, else a JSON object found in the text."""
    if output.status != "ok":
        return None
    return output.parsed if output.parsed is not None else extract_object(output.text)


def slot_judgments(instance: Instance, output: AgentOutput, judge: str, judge_repeat: int) -> list[Judgment]:
    """One 0/1 judgment per personalization-relevant slot; task-fixed slots are not in gold, so not scored."""
    gold: dict[str, Any] = instance.gold.get("slots", {})
    submitted = output_slots(output)
    out = []
    for name, expected in gold.items():
        if submitted is None:
            score, feedback, raw = 0.0, f"agent output {output.status}: no API call to score", ""
        elif name not in submitted:
            score, feedback, raw = 0.0, "slot missing", ""
        else:
            raw = str(submitted[name])
            score = float(normalize_slot(submitted[name]) == normalize_slot(expected))
            feedback = "match" if score else f"expected {expected!r}"
        out.append(Judgment(instance.instance_id, output.agent, output.repeat, judge, judge_repeat,
                            name, "slot", score, "scored", raw, feedback))
    return out


def instance_score(instance: Instance, output: AgentOutput, judgments: list[Judgment],
                   metric: str = "score") -> list[InstanceScore]:
    """100 x mean of the scored items; None when none could be scored; unscored/failed are counted."""
    scored = [j.score for j in judgments if j.status == "scored" and j.score is not None]
    value = 100.0 * sum(scored) / len(scored) if scored else None
    judge = judgments[0].judge if judgments else "rule"
    judge_repeat = judgments[0].judge_repeat if judgments else 0
    return [InstanceScore(instance.instance_id, output.agent, output.repeat, judge, judge_repeat, instance.group,
                          metric, value, n_items=len(judgments), n_unscored=len(judgments) - len(scored))]
