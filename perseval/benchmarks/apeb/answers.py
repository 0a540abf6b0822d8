"""APeB's answers beyond the shared exactly-5 contract (perseval.benchmarks.rankings: the repair rule, `extract`,
`check_ranking`): the strict reading of exactly-5, and a system's ranked ids as its output.

The strict reading of "exactly 5" (`strict_problem`, judge `apeb.ranking_strict`, beside the repaired one):
an output counts only if the system's first answer already was exactly k distinct candidate ids - nothing
dropped by the repair rule and no correction turn; anything else is invalid and scores 0 on every strict
metric. The repair stays what the systems do; the strict judge only reads their traces.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from perseval.benchmarks.rankings import candidate_ids, check_ranking, extract, parse_ranking, ranking_size
from perseval.core.instances import AgentOutput, Instance


def strict_problem(instance: Instance, output: AgentOutput) -> str:
    """Why `output` fails the strict reading of exactly-5 (empty when it passes): a repaired first answer
    or a correction turn (the trace's answer steps, agents/common.ask_ranking), else a submitted text that
    is not exactly k distinct candidate ids as written."""
    _, problem = check_ranking(instance, output)
    if problem:
        return problem
    answers = [s for s in output.trace if s.get("step") == "answer"]
    if any(s.get("repair") for s in answers):
        return "the answer needed repair: " + json.dumps(next(s["repair"] for s in answers if s.get("repair")))
    if any(s.get("attempt", 1) > 1 for s in answers):
        return "the answer needed a correction turn"
    parsed = parse_ranking(output.text, candidate_ids(instance), ranking_size(instance))
    if not answers and (parsed.repaired or len(parsed.ranking) != ranking_size(instance)):
        return f"the submitted text is not exactly {ranking_size(instance)} distinct candidate ids"
    return ""


def ranking_output(instance: Instance, name: str, repeat: int, ranked_ids: Sequence[str],
                   trace: list[dict[str, Any]] | None = None) -> AgentOutput:
    """A system's ranked ids as its output: the top k written as the answer text and read back through
    `extract`, so a system without a model meets the same contract as one with."""
    text = json.dumps({"ranking": list(ranked_ids)[:ranking_size(instance)]})
    answer = extract(instance, text)
    out = AgentOutput(instance.instance_id, name, repeat, text, trace=list(trace or []))
    if answer.problem:
        out.status, out.error = "invalid", answer.problem
    else:
        out.parsed = answer.parsed
    return out
