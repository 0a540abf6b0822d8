"""A small, seeded sample written in exactly the official release layout.

Each user gets a persona (expertise, preferred tone, preferred explanation
style), five queries spanning the four task types, chat sessions that reveal
the persona's preferences, search sessions on the query topics, and noise.
Gold claims, rubrics and rated example responses all follow from the persona,
so the sample has the same shape and the same logic as the real data: the
history carries the evidence that the rubric rewards.
"""
from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from perseval.benchmarks.bespoke import layout as L
from perseval.benchmarks.bespoke import sample_content as C
from perseval.benchmarks.bespoke.records import CriterionRating, RatedResponse
from perseval.benchmarks.bespoke.sample_ratings import Draft, rate, render

QUERIES_PER_USER = 5  # as in the paper: five queries per annotator, covering all four task types


@dataclass
class _User:
    user: str
    persona: C.Persona
    topics: list[C.Topic]


def write_sample(folder: str | Path, users: int = 3, seed: int = 0, queries_per_user: int = QUERIES_PER_USER) -> Path:
    """Write a seeded sample release (plus the optional corpus) under `folder`; returns the folder."""
    rng = random.Random(seed)
    folder = Path(folder)
    rows: dict[L.TableSpec, list[dict[str, str]]] = {spec: [] for spec in (*L.RELEASE_TABLES, L.CORPUS)}
    offset = rng.randrange(len(C.PERSONAS))
    users_topics = []
    for i in range(users):
        person = _User(f"user{i + 1}", C.PERSONAS[(offset + i) % len(C.PERSONAS)], _pick_topics(rng, queries_per_user))
        users_topics.append(person.topics)
        _add_user(rng, person, rows)
    rows[L.CORPUS] = _corpus_rows()
    rows[L.QUERY_TYPES] = []
    for r, topic in zip(rows[L.QUERIES], [t for u in users_topics for t in u]):
        rows[L.QUERY_TYPES].append({"user": r["user"], "query-id": r["query-id"], "task_type": topic.task_type})
    for spec, table_rows in rows.items():
        _write(folder, spec, table_rows)
    return folder


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _write(folder: Path, spec: L.TableSpec, rows: list[dict[str, str]]) -> None:
    path = spec.path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {col: pa.array([r[col] for r in rows], type=pa.string()) for col in spec.columns}
    pq.write_table(pa.table(columns), path)


def _pick_topics(rng: random.Random, n: int) -> list[C.Topic]:
    """One topic per task type, then extra topics of any type, without repeats."""
    by_type = {t: [x for x in C.TOPICS if x.task_type == t] for t in L.TASK_TYPES}
    chosen = [rng.choice(by_type[t]) for t in L.TASK_TYPES][:n]
    rest = [t for t in C.TOPICS if t not in chosen]
    return chosen + rng.sample(rest, min(max(n - len(chosen), 0), len(rest)))


def _add_user(rng: random.Random, person: _User, rows: dict[L.TableSpec, list[dict[str, str]]]) -> None:
    chats, searches = _trait_chats(rng, person.persona), []
    for qid, topic in enumerate(person.topics, start=1):
        facets = _pick_facets(rng, topic)
        _add_query(rng, person, str(qid), topic, facets, rows)
        chats += _topic_chats(rng, topic, facets)
        searches += _topic_searches(topic, facets)
    chats += [_chat([(u, a)]) for u, a in rng.sample(C.NOISE_CHATS, 2)]
    searches += [_search(q, t, s) for q, t, s in rng.sample(C.NOISE_SEARCHES, 4)]
    for spec, sessions in ((L.CHAT, chats), (L.SEARCH, searches)):
        rng.shuffle(sessions)
        rows[spec] += [{"user": person.user, "id": _uid(rng), "history": text} for text in sessions]


def _pick_facets(rng: random.Random, topic: C.Topic) -> list[tuple[str, str]]:
    n = rng.randint(3, min(6, len(topic.facets) - 1))  # leave at least one facet as an off-need distractor
    keep = sorted(rng.sample(range(len(topic.facets)), n))
    return [topic.facets[i] for i in keep]


def _add_query(rng: random.Random, person: _User, qid: str, topic: C.Topic,
               facets: list[tuple[str, str]], rows: dict[L.TableSpec, list[dict[str, str]]]) -> None:
    p, aspects = person.persona, [a for a, _ in facets]
    need = (f"I work as a {p.profession} and want to understand {_join(aspects)}. "
            f"{C.EXPERTISE_NEED[p.expertise]} {C.TONE_NEED[p.tone]} {C.STYLE_NEED[p.style]}")
    key = {"user": person.user, "query-id": qid}
    rows[L.QUERIES].append({**key, "query": topic.query, "gold_information_need": need})
    gold = {L.GOLD_KEY: [c for _, c in facets]}
    rows[L.GOLD].append({**key, "id": _uid(rng), "gold_information_value": json.dumps(gold)})
    rows[L.RUBRIC].append({**key, "id": _uid(rng), "personalized_rubric_value": _rubric(p, aspects)})
    shots, held_out = _rated_sets(rng, p, topic, facets)
    for spec, col, items in ((L.SHOTS, "evaluation_shot_value", shots), (L.META_TEST, "meta_test_set_value", held_out)):
        value = {"query": topic.query, "gold_information_need": need, "response_list": [r.to_json() for r in items]}
        rows[spec].append({**key, "id": _uid(rng), col: json.dumps(value)})


def _rated_sets(rng: random.Random, p: C.Persona, topic: C.Topic,
                facets: list[tuple[str, str]]) -> tuple[list[RatedResponse], list[RatedResponse]]:
    """5-6 rated example responses for the judge (it takes 5 by default, as the official evaluator does),
    and two held-out pairs for meta-evaluation (two per query, as in section 4.1)."""
    wanted = [c for _, c in facets]
    other = [c for _, c in topic.facets if c not in wanted]
    drafts = [Draft.aligned(p, wanted), Draft.off_target(p, other), Draft.generic(wanted, other),
              Draft.wrong_tone(p, wanted), Draft.wrong_depth(p, wanted)]
    if rng.random() < 0.5:
        drafts.append(Draft.partial(p, wanted, other))
    rng.shuffle(drafts)
    shots = [_rated(rng, p, d, wanted) for d in drafts]
    held_out = [Draft.wrong_style(p, wanted), rng.choice([Draft.partial(p, wanted, other), Draft.aligned(p, wanted)])]
    return shots, [_rated(rng, p, d, wanted) for d in held_out]


def _rated(rng: random.Random, p: C.Persona, draft: Draft, wanted: list[str]) -> RatedResponse:
    ratings: dict[str, CriterionRating] = rate(p, draft, wanted)
    if draft.kind == "aligned" and rng.random() < 0.4:  # real raters rarely give straight fives
        name = rng.choice(L.CRITERIA)
        ratings[name] = CriterionRating(4, ratings[name].feedback.replace("Exactly", "Nearly"))
    return RatedResponse(render(p, draft), ratings)


def _rubric(p: C.Persona, aspects: list[str]) -> str:
    style = C.STYLE_LABEL[p.style]
    reader = "an expert" if p.expertise == "expert" else "a newcomer"
    blocks = {
        "need_alignment": [f"Covers {_join(aspects)} directly, with nothing off-topic.",
                           "Covers nearly all requested aspects; one is thin.",
                           "Generic answer; misses one or two requested aspects.",
                           "On topic but mostly about aspects the user did not ask for.",
                           "Does not address the question."],
        "content_depth": [f"Depth fits {reader} exactly.",
                          "Mostly the right depth; slightly too basic or too dense in places.",
                          "Understandable but noticeably mismatched in depth.",
                          "Far too basic or far too technical to be useful.",
                          "Unusable at this reader's level."],
        "tone": [f"Natural {p.tone} tone throughout.",
                 f"Mostly {p.tone}, with a few awkward phrases.",
                 "Neutral and a little robotic.",
                 "The tone this user dislikes dominates.",
                 "Condescending or offensive."],
        "explanation_style": [f"Structured as the user prefers: {style}.",
                              "Mostly the preferred structure; minor lapses.",
                              "Readable but not in the preferred structure.",
                              "Structure works against how this user reads.",
                              "Impossible for this user to follow."],
    }
    parts = []
    for name in L.CRITERIA:
        lines = [f"- {5 - k}: {text}" for k, text in enumerate(blocks[name])]
        parts.append(L.CRITERION_TITLES[name] + "\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --- history sessions ----------------------------------------------------------------------


def _chat(turns: list[tuple[str, str]]) -> str:
    return "\n".join(f"User: {u}\nAssistant: {a}" for u, a in turns)


def _search(query: str, title: str, summary: str) -> str:
    return f"Search query: {query}\nVisits:\n<Title> {title}\n<Page summary> {summary}"


def _trait_chats(rng: random.Random, p: C.Persona) -> list[str]:
    """One chat per trait in which the user corrects the assistant: the preference evidence."""
    chats = []
    for trait, value in (("expertise", p.expertise), ("tone", p.tone), ("style", p.style)):
        ask, reply, correction = C.TRAIT_CHATS[trait, value]
        interest = rng.choice(p.interests)
        chats.append(_chat([(ask.format(interest=interest), reply.format(interest=interest)),
                            (correction, "Understood, I'll do that from now on.")]))
    return chats


def _topic_chats(rng: random.Random, topic: C.Topic, facets: list[tuple[str, str]]) -> list[str]:
    if rng.random() < 0.4:
        return []  # not every query has a related chat, as in real histories
    aspect, claim = facets[0]
    return [_chat([(f"I've been wondering about {topic.search_query}, mostly the {aspect} side.", claim)])]


def _topic_searches(topic: C.Topic, facets: list[tuple[str, str]]) -> list[str]:
    aspect, claim = facets[-1]
    return [_search(topic.search_query, topic.query.rstrip("?"), claim),
            _search(f"{topic.search_query} {aspect}", f"{aspect.capitalize()}: what to know", facets[0][1])]


def _corpus_rows() -> list[dict[str, str]]:
    """Every facet of every topic (gold claims of some query, distractors for the others) plus noise."""
    rows = [{"id": f"fact-{t.key}-{j}", "text": claim} for t in C.TOPICS for j, (_, claim) in enumerate(t.facets)]
    rows += [{"id": f"noise-{k}", "text": f"{title}. {summary}"} for k, (_, title, summary) in enumerate(C.NOISE_SEARCHES)]
    return rows


# The copy checked in as files (tests/data/bespoke_sample): this writer's output for these arguments, so
# a test can prove the files and the code have not drifted apart.
CHECKED_IN = {"users": 3, "seed": 42}

if __name__ == "__main__":  # python -m perseval.benchmarks.bespoke.sample OUT_FOLDER
    import sys

    print(write_sample(sys.argv[1], **CHECKED_IN))
