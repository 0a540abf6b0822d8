"""APeB answers: the exactly-5 contract, enforced here and nowhere else.

An answer is a JSON list of candidate ids, bare or as {"ranking": [...]}; items may be strings, numbers
or {"id": ...} objects. The repair rule (`parse_ranking`), each repair recorded:
  1. ids that are not among the instance's candidates are dropped   (dropped_unknown)
  2. repeats of an id already taken are dropped                     (dropped_duplicate)
  3. ids after the first k = min(5, |candidates|) are dropped       (dropped_extra)
Nothing is ever added: if fewer than k ids remain, the answer is a problem (`extract`). The LLM systems
then send one correction turn that keeps the usable ids and asks the model for the missing ones only
(agents/common.ask_ranking); if that still fails the output is `invalid` with its raw text.
Every system (direct, ReAct, VQRA, the baselines) goes through `extract`; the ranking judge checks what
was submitted with `check_ranking` (not repaired again), scores an invalid output as a miss and counts
it in the `valid` metric, so invalid outputs are counted per system.

The strict reading of "exactly 5" (`strict_problem`, judge `apeb.ranking_strict`, beside the repaired one):
an output counts only if the system's first answer already was exactly k distinct candidate ids - nothing
dropped by the repair rule and no correction turn; anything else is invalid and scores 0 on every strict
metric. The repair stays what the systems do; the strict judge only reads their traces.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from perseval.benchmarks.apeb.prompts import ranking_messages, ranking_schema
from perseval.agents.contract import Answer, Prompt, TaskFormat
from perseval.core.parsing import extract_json
from perseval.core.instances import AgentOutput, Instance, Passage
from perseval.benchmarks.views import RankingPayload

TOP_K = 5  # the agent recommends exactly five products


@dataclass
class RankingAnswer:
    ranking: list[str]  # valid, distinct candidate ids, at most k
    found: bool  # a list of ids could be read at all
    dropped_unknown: list[str] = field(default_factory=list)
    dropped_duplicate: list[str] = field(default_factory=list)
    dropped_extra: list[str] = field(default_factory=list)

    @property
    def repaired(self) -> bool:
        return bool(self.dropped_unknown or self.dropped_duplicate or self.dropped_extra)

    def repairs(self) -> dict[str, list[str]]:
        return {"dropped_unknown": self.dropped_unknown, "dropped_duplicate": self.dropped_duplicate,
                "dropped_extra": self.dropped_extra}


def _items(text: str) -> list[Any] | None:
    value = extract_json(text)
    if isinstance(value, dict):
        value = value.get("ranking")
    return value if isinstance(value, list) else None


def _as_id(item: Any) -> str:
    # Small models sometimes answer [{"id": "p1"}, ...] or bare numbers: read those too.
    if isinstance(item, dict):
        item = item.get("id", "")
    return str(item).strip()


def parse_ranking(text: str, candidate_ids: list[str], k: int = 5) -> RankingAnswer:
    """Read up to `k` distinct candidate ids, dropping (and recording) unknown, repeated and extra ones."""
    items = _items(text)
    if items is None:
        return RankingAnswer([], found=False)
    allowed = set(candidate_ids)
    out = RankingAnswer([], found=True)
    for raw in items:
        pid = _as_id(raw)
        if pid not in allowed:
            out.dropped_unknown.append(pid)
        elif pid in out.ranking:
            out.dropped_duplicate.append(pid)
        elif len(out.ranking) >= k:
            out.dropped_extra.append(pid)
        else:
            out.ranking.append(pid)
    return out


def candidate_ids(instance: Instance) -> list[str]:
    return [c["id"] for c in RankingPayload.of(instance).candidates]


def ranking_size(instance: Instance) -> int:
    return min(TOP_K, len(RankingPayload.of(instance).candidates))


def extract(instance: Instance, text: str) -> Answer:
    """The ranking in `text`, repaired (unknown/duplicate/extra ids dropped); a problem unless k ids remain
    (the partial ranking is kept in `parsed` for the trace and a correction turn)."""
    k = ranking_size(instance)
    answer = parse_ranking(text, candidate_ids(instance), k)
    problem = "" if len(answer.ranking) == k else f"{len(answer.ranking)} usable candidate ids, {k} needed"
    return Answer({"ranking": answer.ranking}, problem, answer.repairs() if answer.repaired else {})


def check_ranking(instance: Instance, output: AgentOutput) -> tuple[list[str] | None, str]:
    """The output's ranking when it is exactly min(5, |candidates|) distinct candidate ids, else (None, why).

    Checked on what the agent submitted (not repaired again), so an agent cannot list every candidate
    to inflate Hit@5."""
    if output.status != "ok":
        return None, f"status {output.status}" + (f" ({output.error})" if output.error else "")
    ranking = (output.parsed or {}).get("ranking")
    if not isinstance(ranking, list):
        return None, "no ranking list in the parsed output"
    ids, k = set(candidate_ids(instance)), ranking_size(instance)
    if len(ranking) != k or len(set(ranking)) != k or not set(ranking) <= ids:
        return None, f"ranking must be {k} distinct candidate ids, got {ranking!r}"
    return list(ranking), ""


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


class ApebTask(TaskFormat):
    """The single-step ranking prompt, with retrieved history passages as the shopper's activity."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        history = [f"- {p.text[:passage_chars]}" for p in passages] if passages else None
        cards, k = RankingPayload.of(instance).candidates, ranking_size(instance)
        return Prompt(ranking_messages(instance.query, cards, history, k), ranking_schema(candidate_ids(instance), k))

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
