"""A ranking over a candidate set, as APeB's systems and a user's own ranking instances (custom) both ask for it
and read it: the request's templates (the text the model receives; APeB's card and custom's name them), the
request, and the exactly-k contract, enforced here and nowhere else.

The request (direct ranking, VQRA's second step, ReAct's final answer): a system message, then the shopper's
activity (one line per history event, oldest first; absent for a no-history system), the query, VQRA's
refined query where there is one, the candidates (one line each) and the final instruction, joined with blank
lines, under a JSON schema {"ranking": [k candidate ids]}. Kept compact on purpose: the embedded default is a
135M model with a 4k context, so a history line is one short line and a candidate one line.

An answer is a JSON list of candidate ids, bare or as {"ranking": [...]}; items may be strings, numbers
or {"id": ...} objects. The repair rule (`parse_ranking`), each repair recorded:
  1. ids that are not among the instance's candidates are dropped   (dropped_unknown)
  2. repeats of an id already taken are dropped                     (dropped_duplicate)
  3. ids after the first k = min(5, |candidates|) are dropped       (dropped_extra)
Nothing is ever added: if fewer than k ids remain, the answer is a problem (`extract`). APeB's LLM systems
then send one correction turn that keeps the usable ids and asks the model for the missing ones only
(perseval.benchmarks.apeb.agents.common); if that still fails the output is `invalid` with its raw text.
Every system goes through `extract`; the ranking judge (perseval.benchmarks.ranking_judge) checks what was
submitted with `check_ranking` (not repaired again) and scores an invalid output as a miss.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from perseval.agents.contract import Answer, Prompt, RequestFormat
from perseval.benchmarks.views import RankingPayload
from perseval.core.instances import AgentOutput, Instance, Passage
from perseval.core.parsing import extract_json

SYSTEM = ("You are a personal shopping assistant. Given what a shopper searched for and what they did "
          "on the platform before, pick the products they are most likely to buy. Reply with JSON only.")
ACTIVITY_TEMPLATE = "The shopper's recent activity, oldest first:\n{activity}"  # history lines "- <date> <event>"
NO_ACTIVITY = "- (no recorded activity)"
QUERY_TEMPLATE = 'The shopper searched for: "{query}"'
REFINED_TEMPLATE = 'What they most likely want, given their history: "{refined}"'
CANDIDATES_TEMPLATE = "Candidate products:\n{candidates}"  # "<id>: <title> | brand <b> | $<price> | <attributes>"
FINAL_TEMPLATE = ("Choose the {k} candidates this shopper is most likely to buy, most likely first. "
                  'Answer as {{"ranking": [{k} candidate ids]}}, using only ids from the list, each once.')

TOP_K = 5  # the agent recommends exactly five products


# --- the request ------------------------------------------------------------------------------------


def candidate_line(card: dict[str, Any]) -> str:
    parts = [f"{card['id']}: {card['title']}"]
    if card.get("brand"):
        parts.append(f"brand {card['brand']}")
    parts.append(f"${float(card['price']):.2f}")
    title = card["title"].lower()
    extra = [a for a in card.get("attributes") or [] if a.replace("-", " ").lower() not in title]
    if extra:
        parts.append(", ".join(extra))
    return " | ".join(parts)


def activity_block(history: list[str]) -> str:
    return ACTIVITY_TEMPLATE.format(activity="\n".join(history) if history else NO_ACTIVITY)


def ranking_messages(query: str, candidates: list[dict[str, Any]], history: list[str] | None,
                     k: int = 5, refined: str | None = None) -> list[dict[str, str]]:
    """Chat messages asking for the `k` best candidate ids; `history` None means no history section;
    `refined` is a history-aware rewrite of the query (VQRA), shown beside the shopper's own words."""
    parts = [activity_block(history)] if history is not None else []
    parts.append(QUERY_TEMPLATE.format(query=query))
    if refined:
        parts.append(REFINED_TEMPLATE.format(refined=refined))
    parts.append(CANDIDATES_TEMPLATE.format(candidates="\n".join(candidate_line(c) for c in candidates)))
    parts.append(final_instruction(k))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def final_instruction(k: int) -> str:
    return FINAL_TEMPLATE.format(k=k)


def ranking_schema(candidate_ids: list[str], k: int = 5) -> dict[str, Any]:
    # No uniqueItems: llama.cpp's grammar converter does not enforce it; the parser repairs duplicates.
    return {
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": {"type": "string", "enum": list(candidate_ids)},
                                   "minItems": k, "maxItems": k}},
        "required": ["ranking"],
        "additionalProperties": False,
    }


# --- reading the answer -----------------------------------------------------------------------------


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


class RankingFormat(RequestFormat):
    """The single-step ranking prompt, with retrieved history passages as the shopper's activity."""

    def prompt(self, instance: Instance, passages: Sequence[Passage], passage_chars: int) -> Prompt:
        history = [f"- {p.text[:passage_chars]}" for p in passages] if passages else None
        cards, k = RankingPayload.of(instance).candidates, ranking_size(instance)
        return Prompt(ranking_messages(instance.query, cards, history, k), ranking_schema(candidate_ids(instance), k))

    def extract(self, instance: Instance, text: str) -> Answer:
        return extract(instance, text)
