"""Deep Retrieval (paper section 4): task retrieval, facet query expansion, dense retrieval per query,
content-hash redundancy filter, LLM salience re-ranking (keep >= threshold; salience.py scores the model's labels
after Table 12), capped evidence context."""
from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

from perseval.benchmarks.iba.agents.iba_agent import prompts
from perseval.benchmarks.iba.agents.iba_agent.salience import Rating, parse_rating
from perseval.benchmarks.iba.agents.iba_agent.state import Scored, StageFailed, State
from perseval.llm.usage import prompt_record, trace_fields
from perseval.agents.rag import passage_trace
from perseval.core.parsing import extract_json
from perseval.core.instances import Passage

_FACET_PAIR = re.compile(r'"(' + "|".join(prompts.FACETS) + r')"\s*:\s*"([^"]+)"')


# --- retrieval -----------------------------------------------------------------------


async def retrieve(state: State, query: str, k: int, step: str = "retrieve") -> list[Passage]:
    """Dense retrieval over the user's history; a back-end error ends the run like a failed request."""
    try:
        passages = await state.ctx.retrieve(state.instance.user_id, query, k) if k > 0 else []
    except Exception as exc:  # noqa: BLE001 - any back-end error is recorded, not raised past the agent
        state.log(step, status="failed", query=query, error=f"{type(exc).__name__}: {exc}")
        raise StageFailed(step, f"{type(exc).__name__}: {exc}") from exc
    state.trace.append({**passage_trace(query, k, passages), "step": step})
    state.retrievals.append(passages)
    state.kept = state.evidence = None  # new candidates: any earlier selection and its evidence are stale
    return passages


async def plain_retrieve(state: State) -> list[Scored]:
    """The w/o Deep Retrieval ablation: top-k with the task text, nothing else."""
    passages = await retrieve(state, state.instance.query, state.settings.top_k)
    state.kept = [Scored(p) for p in passages]
    log_kept(state, "plain")
    return state.kept


# --- query expansion ------------------------------------------------------------------


def parse_expansion(text: str, limit: int) -> list[str] | None:
    """Facet queries from a JSON object, a JSON list, or complete "facet": "query" pairs of a cut answer."""
    value = extract_json(text)
    if isinstance(value, dict):
        items = _dict_items(value)
    elif isinstance(value, list):
        items = value
    else:  # a reply cut off by max_tokens still holds its finished pairs
        items = [q for _, q in _FACET_PAIR.findall(text or "")]
    queries = [" ".join(str(q).split()) for q in items if isinstance(q, str) and q.strip()]
    unique = list(dict.fromkeys(queries))[:limit]
    return unique or None


def _dict_items(value: dict[str, Any]) -> list[Any]:
    if any(f in value for f in prompts.FACETS):
        return [value.get(f) for f in prompts.FACETS]
    if isinstance(value.get("queries"), list):
        return value["queries"]
    return list(value.values())


def fallback_queries(task: str, limit: int) -> list[str]:
    """Template facet queries: still broad retrieval when the model's expansion is unusable."""
    return [f"{task} {hint}" for hint in prompts.FACET_HINTS.values()][:limit]


async def expand_queries(state: State) -> list[str]:
    limit = state.settings.max_queries
    if limit == 0:
        state.queries = []
        return []
    messages = prompts.expansion_messages(state.instance.query, state.instance.payload)
    result = await state.ask("expand_queries", messages, json_schema=prompts.EXPANSION_SCHEMA,
                             max_tokens=state.settings.expand_max_tokens)
    queries = parse_expansion(result.text, limit)
    fallback = queries is None
    state.queries = queries if queries is not None else fallback_queries(state.instance.query, limit)
    state.log("expand_queries", queries=state.queries, fallback=fallback, raw=result.text[:1000],
              **trace_fields(result), **prompt_record(messages))
    return state.queries


async def retrieve_expanded(state: State) -> None:
    for query in state.queries:
        await retrieve(state, query, state.settings.top_k, step="retrieve_expanded")


# --- refinement -----------------------------------------------------------------------


def content_hash(text: str) -> str:
    """Hash of the text with case, punctuation and spacing ignored: repeated snippets collide."""
    norm = " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())
    return hashlib.sha1(norm.encode()).hexdigest()[:16]


def interleave(lists: list[list[Passage]]) -> list[Passage]:
    """Rank 1 of every query, then rank 2, ...: each facet reaches the capped context."""
    out = []
    for rank in range(max((len(x) for x in lists), default=0)):
        out += [x[rank] for x in lists if rank < len(x)]
    return out


def drop_duplicates(passages: list[Passage]) -> tuple[list[Passage], list[dict[str, Any]]]:
    seen: dict[str, Passage] = {}
    kept, removed = [], []
    for p in passages:
        h = content_hash(p.text)
        if h in seen:
            first = seen[h]
            removed.append({"doc_id": p.doc_id, "chunk_id": p.chunk_id, "hash": h,
                            "duplicate_of": {"doc_id": first.doc_id, "chunk_id": first.chunk_id}})
        else:
            seen[h] = p
            kept.append(p)
    return kept, removed


def candidates(state: State) -> list[Passage]:
    """Every retrieved passage once, interleaved across queries; the filter is logged."""
    merged = interleave(state.retrievals)
    unique, removed = drop_duplicates(merged)
    state.log("redundancy_filter", candidates=len(merged), removed=removed, unique=len(unique),
              passages=passage_refs(unique))
    return unique


def passage_refs(passages: list[Passage]) -> list[dict[str, Any]]:
    """The trace's passage entries: doc_id, chunk_id, retrieval score (the trace convention of every agent)."""
    return [{"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": p.score} for p in passages]


async def score_salience(state: State, passages: list[Passage]) -> list[int | None]:
    """One labelling request per passage, all in flight at once (the server batches them)."""
    s = state.settings

    rating = s.salience == "rating"  # the paper's 0..10 rating, else labels that salience.py scores
    ask_for = prompts.rating_messages if rating else prompts.salience_messages
    schema = prompts.RATING_SCHEMA if rating else prompts.SALIENCE_SCHEMA

    async def one(messages: list[dict[str, str]]) -> tuple[Rating | None, str]:
        result = await state.ask("salience", messages, json_schema=schema, max_tokens=s.salience_max_tokens)
        return parse_rating(result.text), result.text

    asked = [ask_for(state.instance.query, p.text[:s.salience_chars]) for p in passages]
    # let every request finish before failing, so no stray request outlives the run
    answers = await asyncio.gather(*(one(m) for m in asked), return_exceptions=True)
    for a in answers:
        if isinstance(a, BaseException):
            raise a
    # one request per passage, alike but for the passage: the trace shows the first one's prompt
    shown = prompt_record(asked[0]) if asked else {}
    state.log("salience", threshold=s.salience_threshold, mode=s.salience, scores=[
        {"doc_id": p.doc_id, "chunk_id": p.chunk_id, "score": r.score if r else None, "parsed": r is not None,
         **(r.trace() if r else {"raw": raw[:200]})}
        for p, (r, raw) in zip(passages, answers)], **shown, **({"prompt_of": f"the first of {len(passages)} "
                                                                 "requests, one per passage"} if shown else {}))
    return [r.score if r else None for r, _ in answers]


def select(passages: list[Passage], scores: list[int | None] | None, threshold: int, cap: int) -> list[Scored]:
    """Passages at or above the threshold, best first; unscorable ones keep retrieval order after them.

    An answer we cannot read is no evidence that the passage is weak, so it is
    neither trusted above scored passages nor dropped.
    """
    if scores is None:
        return [Scored(p) for p in passages[:cap]]
    passing = [(i, s) for i, s in enumerate(scores) if s is not None and s >= threshold]
    passing.sort(key=lambda t: (-t[1], t[0]))
    unknown = [i for i, s in enumerate(scores) if s is None]
    chosen = [Scored(passages[i], s) for i, s in passing] + [Scored(passages[i]) for i in unknown]
    return chosen[:cap]


def top_up(passages: list[Passage], scores: list[int | None], threshold: int, n: int, anything: bool,
           first: list[Passage], taken: set[int] = frozenset()) -> list[Scored]:
    """The `n` best passages below the threshold: ones the rater found relevant (score > 0), or with
    `anything` also those it scored 0. Ties (a weak rater gives many equal scores) go to the order of the
    first retrieval - the task text's in the pipeline, the RAG baseline's ranking - then candidate order:
    a weak model's expanded queries are the least trustworthy ranking there is."""
    first_rank = {content_hash(p.text): r for r, p in enumerate(first)}

    def rank(i: int) -> tuple[int, int, int]:
        return -(scores[i] or 0), first_rank.get(content_hash(passages[i].text), len(first)), i

    floor = 0 if anything else 1
    below = sorted((i for i, s in enumerate(scores)
                    if s is not None and floor <= s < threshold and i not in taken), key=rank)
    return [Scored(passages[i], scores[i]) for i in below[:n]]


def select_robust(passages: list[Passage], scores: list[int | None], first: list[Passage], threshold: int,
                  cap: int, confident_drop: int) -> tuple[list[int], list[int]]:
    """(indexes kept, indexes of the task text's own top-k kept below the threshold).

    Ranked by the rater's score; ties, and answers that could not be read, go by retrieval score. The task
    text's top-k (the RAG baseline's context) is kept whatever the rater says unless it is confident the
    passage is unrelated (a readable score at most `confident_drop`), and the cap never cuts it: a rater that
    cannot tell evidence from noise then leaves at least the retrieval it re-ranks.
    """
    first_hashes = {content_hash(p.text) for p in first}
    protected = [i for i, p in enumerate(passages) if content_hash(p.text) in first_hashes
                 and not (scores[i] is not None and scores[i] <= confident_drop)]
    unknown_rank = threshold  # an unreadable answer is no evidence either way: kept, after the confident ones

    def rank(i: int) -> tuple[float, float, int]:
        return -(scores[i] if scores[i] is not None else unknown_rank - 0.5), -passages[i].score, i

    passing = [i for i, s in enumerate(scores) if (s is None or s >= threshold) and i not in protected]
    room = max(cap - len(protected), 0)
    chosen = sorted(protected + sorted(passing, key=rank)[:room], key=rank)
    below = [i for i in protected if scores[i] is not None and scores[i] < threshold]
    return chosen, below


async def refine(state: State) -> list[Scored]:
    """Redundancy filter, then (optionally) salience re-ranking, then the cap.

    `selection: threshold` (the paper): passages at or above the threshold, best first. `selection: robust`:
    the same ranking, but the task text's own top-k stays unless the rater is confident (select_robust).
    Either way the context then holds at least `min_passages` when the candidates allow: when fewer were
    kept, the best of the rest fill up - only passages the rater called relevant, unless none passed at
    all, since an empty context throws the retrieval away. The trace names every passage kept below the
    threshold.
    """
    s = state.settings
    unique = candidates(state)
    scores = await score_salience(state, unique) if s.rerank and unique else None
    if scores is None:
        state.kept = select(unique, None, s.salience_threshold, s.max_passages)
        log_kept(state, "retrieval_order")
        return state.kept
    extra: dict[str, Any] = {}
    if s.selection == "robust":
        chosen, below = select_robust(unique, scores, state.retrievals[0], s.salience_threshold, s.max_passages,
                                      s.confident_drop)
        state.kept = [Scored(unique[i], scores[i]) for i in chosen]
        extra["task_top_k_below_threshold"] = [unique[i].doc_id for i in below]
    else:
        state.kept = select(unique, scores, s.salience_threshold, s.max_passages)
        chosen = [unique.index(k.passage) for k in state.kept]
    short = min(s.min_passages, s.max_passages) - len(state.kept)
    added = top_up(unique, scores, s.salience_threshold, short, not state.kept, state.retrievals[0],
                   set(chosen)) if short > 0 else []
    if not added:
        log_kept(state, s.selection if s.selection == "robust" else "reranked", **extra)
    else:
        how = "topped_up" if state.kept else "below_threshold"
        note = (f"{len(state.kept)} passage(s) reached salience {s.salience_threshold}; added the {len(added)} "
                "best below it (ties in the first retrieval's order)")
        state.kept = state.kept + added
        log_kept(state, how, note=note, below_threshold=[k.passage.doc_id for k in added], **extra)
    return state.kept


def log_kept(state: State, how: str, **extra: Any) -> None:
    state.evidence = None  # a new selection: the compact evidence is made again from it
    state.log("kept_passages", selection=how, **extra, passages=[
        {"doc_id": k.passage.doc_id, "chunk_id": k.passage.chunk_id, "score": k.passage.score,
         "salience": k.salience} for k in state.kept or []])


def current_evidence(state: State) -> list[Scored]:
    """The evidence context as it stands: the selection if one was made, else the filtered candidates."""
    if state.kept is None:
        unique = candidates(state)
        state.kept = select(unique, None, state.settings.salience_threshold, state.settings.max_passages)
        log_kept(state, "retrieval_order")
    return state.kept


async def deep_retrieve(state: State) -> list[Scored]:
    """The full module, in the paper's order."""
    await retrieve(state, state.instance.query, state.settings.top_k)
    await expand_queries(state)
    await retrieve_expanded(state)
    return await refine(state)
