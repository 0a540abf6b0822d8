"""Every benchmark opens with its card (perseval/benchmarks/<name>/card.py): its pointers name code that
exists, its protocol sheet exists, and its prompt templates, rendered here on the shipped sample straight
from the release files, are what the agents really send (a scripted chat model records the messages)."""
from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path

import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.base import build_all
from perseval.benchmarks.card import BenchmarkCard
from perseval.core.instances import Passage
from perseval.kernel.registry import agent_class, benchmark_class
from tests.conftest import REPO
from tests.scripted import ScriptedChat

BENCHMARKS = REPO / "perseval" / "benchmarks"
CARDS = sorted(p.parent.name for p in BENCHMARKS.glob("*/card.py"))


def resolve(pointer: str) -> object:
    """The object a card's "module:attribute" pointer names (module relative to `perseval.`)."""
    module, _, attribute = pointer.partition(":")
    value = importlib.import_module(f"perseval.{module}")
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


def card_of(name: str) -> BenchmarkCard:
    return importlib.import_module(f"perseval.benchmarks.{name}.card").CARD


def test_every_benchmark_folder_has_a_card():
    folders = sorted(p.parent.name for p in BENCHMARKS.glob("*/benchmark.py"))
    assert CARDS == folders


@pytest.mark.parametrize("name", CARDS)
def test_a_card_is_one_short_page_whose_pointers_name_real_code(name):
    card = card_of(name)
    assert card.name == name or benchmark_class(card.name)
    assert len((BENCHMARKS / name / "card.py").read_text().splitlines()) <= 160
    assert (REPO / card.protocol).is_file() and card.prompts and card.judges and card.metrics
    for what, pointer in card.pointers().items():
        assert resolve(pointer) is not None, (what, pointer)


def sent(agent_name: str, instance, ctx: AgentContext, **params) -> list[dict]:
    """The messages `agent_name` sends for `instance` (a scripted model records them)."""
    chat = ScriptedChat('{"answer": "x"}')
    agent = agent_class(agent_name)(agent_class(agent_name).Params(**params))
    asyncio.run(agent.act(instance, AgentContext(**{**ctx.__dict__, "llm": chat}), 0, agent_name))
    return chat.calls[0]["messages"]


def history_context(data, task) -> AgentContext:
    """Retrieval that returns the owner's history in file order (the test then knows which items are shown)."""
    def retrieve(owner, query, k):
        async def run():
            return [Passage(d.doc_id, 0, d.text, 1.0) for d in data.documents if d.owner == owner][:k]
        return run()
    return AgentContext(retrieve=retrieve, request_format=task,
                        documents=lambda o: [d for d in data.documents if d.owner == o])


# --- LaMP ---------------------------------------------------------------------------------------------

def lamp_expected(task: str, question: dict, k: int) -> str:
    from perseval.benchmarks.lamp import card
    items = [card.ITEM_TEMPLATES[task].format(**item) for item in question["profile"][:k]]
    text = question["input"]
    if not items:
        return card.NO_PROFILE_TEMPLATE.format(input=text)
    joined = card.ITEM_SEPARATOR.join(items)
    if task == "LaMP-1":
        cut = text.index("title") + len("title")
        return card.PROMPT_TEMPLATES[task].format(head=text[:cut], items=joined, tail=text[cut:])
    return card.PROMPT_TEMPLATES.get(task, card.PROMPT_TEMPLATE).format(items=joined, input=text)


@pytest.mark.parametrize("k", [0, 2])
def test_lamps_templates_are_what_the_rag_agent_sends_on_the_sample(k):
    bench = benchmark_class("lamp")(benchmark_class("lamp").Params())
    data = build_all(bench, sample=3, seed=1, source=None)
    sample = BENCHMARKS / "lamp" / "sample"
    checked = set()
    for inst in data.instances:
        task = inst.group
        folder = next(p for p in (sample / task.replace("-", "_")).rglob("dev_questions.json"))
        question = next(q for q in json.loads(folder.read_text()) if inst.instance_id.endswith(f"-{q['id']}"))
        messages = sent("rag", inst, history_context(data, bench.request_format), top_k=k, passage_chars=None)
        assert messages == [{"role": "user", "content": lamp_expected(task, question, k)}]
        checked.add(task)
    assert checked == {"LaMP-1", "LaMP-2", "LaMP-3", "LaMP-4", "LaMP-5", "LaMP-7"}


# --- LaMP-QA ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 2])
def test_lamp_qas_templates_are_what_the_rag_agent_and_the_judge_send_on_the_sample(k):
    from perseval.benchmarks.lamp_qa import card
    from perseval.core.instances import AgentOutput
    from perseval.judges.base import JudgeBinding
    from perseval.judges.quoting import quote
    from perseval.kernel.registry import judge_class
    bench = benchmark_class("lamp_qa")(benchmark_class("lamp_qa").Params())
    data = build_all(bench, sample=2, seed=1, source=None)
    rows = {str(q["id"]): q for f in (BENCHMARKS / "lamp_qa" / "sample").glob("*.json")
            for q in json.loads(f.read_text())}
    for inst in data.instances:
        question = next(q for qid, q in rows.items() if inst.instance_id.endswith(f"-{qid}"))
        items = [p["text"].strip() for p in question["profile"][:k]]
        user = (card.PROFILE_TEMPLATE.format(items=card.ITEM_SEPARATOR.join(items), question=question["question"])
                if items else card.NO_PROFILE_TEMPLATE.format(question=question["question"]))
        system = card.PROFILE_SYSTEM if items else card.ANSWER_SYSTEM
        messages = sent("rag", inst, history_context(data, bench.request_format), top_k=k, passage_chars=None)
        assert messages == [{"role": "system", "content": system}, {"role": "user", "content": user}]
    inst = data.instances[0]
    question = next(q for qid, q in rows.items() if inst.instance_id.endswith(f"-{qid}"))
    aspect = question["rubric_aspects"][0]
    chat = ScriptedChat('{"match_score": 2}')
    judge = judge_class("lamp_qa.aspects")(judge_class("lamp_qa.aspects").Params())
    out = AgentOutput(inst.instance_id, "a", 0, "An answer.", parsed={"answer": "An answer."})
    asyncio.run(judge.judge(inst, out, JudgeBinding("m", chat)))
    user = card.JUDGE_TEMPLATE.format(question=question["question"], narrative=question["narrative"] or "(none)",
                                      response=quote("response", "An answer."), **aspect)
    assert chat.calls[0]["messages"][1] == {"role": "user", "content": user}
    assert chat.calls[0]["messages"][0]["content"].startswith(card.JUDGE_INSTRUCTION)


# --- LongLaMP -----------------------------------------------------------------------------------------

def sample_rows(folder: Path) -> list[tuple[str, dict]]:
    """(file's folder, row) of every sample file: a JSON list, or one row a line (as `datasets` writes)."""
    rows = []
    for path in sorted(folder.rglob("*.json")):
        text = path.read_text()
        rows += [(path.parent.name, r) for r in (json.loads(text) if text.startswith("[")
                                                 else map(json.loads, text.splitlines()))]
    return rows


@pytest.mark.parametrize("setting, k", [("user", 0), ("user", 2), ("temporal", 3)])
def test_longlamps_templates_are_what_the_rag_and_random_k_agents_send_on_the_sample(setting, k):
    from perseval.benchmarks.longlamp import card
    bench = benchmark_class("longlamp")(benchmark_class("longlamp").Params(setting=setting))
    data = build_all(bench, sample=3, seed=1, source=None)
    rows = sample_rows(BENCHMARKS / "longlamp" / "sample")
    ctx = history_context(data, bench.request_format)
    for inst in data.instances:
        task = inst.group
        raw = next(r for folder, r in rows if folder == f"{task}_{setting}" and r["input"] == inst.query)
        items = [card.ITEM_TEMPLATES[task].format(**{f: str(v).strip() for f, v in item.items()})
                 for item in raw["profile"]]
        user = (card.PROMPT_TEMPLATES[task].format(items=card.ITEM_SEPARATOR.join(items[:k]), input=raw["input"])
                if k else card.NO_PROFILE_TEMPLATE.format(input=raw["input"]))
        assert sent("rag", inst, ctx, top_k=k, passage_chars=None) == [{"role": "user", "content": user}]
        if k:  # random-k drawing every item: the same templates, in the draw's order
            drawn = sent("random_k", inst, ctx, top_k=len(items), passage_chars=None)[0]["content"]
            assert all(text in drawn for text in items) and drawn.endswith(raw["input"])
    assert {i.group for i in data.instances} == {"abstract_generation", "product_review", "topic_writing"}


# --- PersonaMem ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 2])
def test_persona_mems_templates_are_what_the_rag_agent_sends_on_the_test_release(k):
    import csv
    from perseval.benchmarks.persona_mem import card
    bench = benchmark_class("persona_mem")(benchmark_class("persona_mem").Params())
    data = build_all(bench, sample=4, seed=1, source=REPO / "tests" / "data" / "persona_mem")
    rows = {r["question_id"]: r for r in csv.DictReader((REPO / "tests/data/persona_mem/questions_32k.csv").open())}
    assert data.instances
    for inst in data.instances:
        row = next(r for qid, r in rows.items() if inst.instance_id.endswith(qid))
        options = "\n".join(card.OPTION_TEMPLATE.format(letter=letter, text=text)
                            for letter, text in zip("abcd", inst.payload["options"]))
        user = card.QUESTION_TEMPLATE.format(question=row["user_question_or_message"], options=options)
        shown = [d.text for d in data.documents if d.owner == inst.user_id][:k]
        if shown:
            block = card.EXCERPTS_TEMPLATE.format(excerpts="\n".join(card.EXCERPT_TEMPLATE.format(excerpt=t)
                                                                     for t in shown))
            user = card.WITH_EXCERPTS_TEMPLATE.format(excerpts_block=block, question=row["user_question_or_message"],
                                                      options=options)
        messages = sent("rag", inst, history_context(data, bench.request_format), top_k=k, passage_chars=None)
        assert messages == [{"role": "user", "content": user}]


# --- PrefEval -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("reminder", [False, True])
def test_prefevals_templates_are_what_the_zero_shot_agent_sends_on_the_test_release(reminder):
    from perseval.benchmarks.prefeval import card
    bench = benchmark_class("prefeval")(benchmark_class("prefeval").Params(inter_turns=[2]))
    data = build_all(bench, sample=6, seed=1, source=REPO / "tests" / "data" / "prefeval")
    kinds = set()
    for inst in data.instances:
        final = sent("prefeval.zero_shot", inst, history_context(data, None), reminder=reminder)[-1]
        tail = [card.REMINDER] if reminder else []
        if inst.payload["task"] == "classification":
            options = "\n".join(card.OPTION_TEMPLATE.format(letter=letter, text=text)
                                for letter, text in zip("ABCD", inst.payload["options"]))
            parts = [inst.query, *tail, card.MCQ_INSTRUCTION, options]
        else:
            parts = [inst.query + " " + card.WORD_LIMIT.format(n=300), *tail]
        assert final == {"role": "user", "content": "\n\n".join(parts)}
        kinds.add(inst.payload["task"])
    assert kinds == {"classification", "generation"}


# --- APeB ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("history", [False, True])
def test_apebs_templates_are_what_the_direct_agent_sends_on_the_generated_sample(history):
    from perseval.benchmarks.apeb import card
    from perseval.benchmarks.rankings import candidate_line
    bench = benchmark_class("apeb")(benchmark_class("apeb").Params())
    data = build_all(bench, sample=3, seed=1, source=None)
    for inst in data.instances[:4]:
        params = {"use_history": history, "retrieve_k": 2 if history else None}
        messages = sent("apeb.direct", inst, history_context(data, None), **params)
        candidates = inst.payload["candidates"]
        parts = [card.QUERY_TEMPLATE.format(query=inst.query),
                 card.CANDIDATES_TEMPLATE.format(candidates="\n".join(candidate_line(c) for c in candidates)),
                 card.FINAL_TEMPLATE.format(k=5)]
        if history:
            shown = [f"- {d.text}" for d in data.documents if d.owner == inst.user_id][:2]
            parts.insert(0, card.ACTIVITY_TEMPLATE.format(activity="\n".join(shown) or card.NO_ACTIVITY))
        assert messages == [{"role": "system", "content": card.SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


# --- IBA-Bench ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 2])
def test_ibas_templates_are_what_the_rag_agent_sends_on_the_constructed_sample(k):
    from perseval.benchmarks.iba import card
    bench = benchmark_class("iba")(benchmark_class("iba").Params())
    data = build_all(bench, sample=8, seed=1, source=None)
    kinds = set()
    for inst in data.instances:
        shown = [d.text for d in data.documents if d.owner == inst.user_id][:k]
        passages = "\n".join(card.PASSAGE_TEMPLATE.format(i=i, text=t) for i, t in enumerate(shown, 1))
        history = card.HISTORY_TEMPLATE.format(passages=passages) if shown else ""
        api = inst.payload.get("api")
        if api:
            slots = "\n".join(card.SLOT_TEMPLATE.format(name=s["name"], allowed=" | ".join(s["values"]))
                              for s in api["slots"] if s["name"] not in api.get("task_fixed", {}))
            user = card.API_TEMPLATE.format(history=history, task=inst.query, api=api["name"], slots=slots)
        else:
            user = card.GENERATE_TEMPLATE.format(history=history, task=inst.query)
        messages = sent("rag", inst, history_context(data, bench.request_format), top_k=k, passage_chars=None)
        assert messages == [{"role": "system", "content": card.AGENT_SYSTEM}, {"role": "user", "content": user}]
        kinds.add(bool(api))
    assert kinds == {True, False}


# --- Bespoke ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 2])
def test_bespokes_templates_are_what_the_rag_agent_sends_on_the_shipped_sample(k):
    from perseval.benchmarks.bespoke import card
    bench = benchmark_class("bespoke")(benchmark_class("bespoke").Params())
    data = build_all(bench, sample=2, seed=1, source=None)
    for inst in data.instances[:3]:
        shown = [d.text.strip() for d in data.documents if d.owner == inst.user_id][:k]
        parts = [card.QUERY_TEMPLATE.format(query=inst.query)]
        if shown:
            sessions = "\n".join(card.SESSION_TEMPLATE.format(source="session", text=t) for t in shown)
            parts.append(card.USER_CONTEXT_TEMPLATE.format(user_context=sessions))
        parts.append(card.FINAL_INSTRUCTION)
        messages = sent("rag", inst, history_context(data, bench.request_format), top_k=k, passage_chars=None)
        assert messages == [{"role": "system", "content": card.ANSWER_SYSTEM},
                            {"role": "user", "content": "\n\n".join(parts)}]


# --- custom (a user's own data) ------------------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 2])
def test_customs_templates_are_what_the_rag_agent_sends_on_the_example(k):
    """Each instance type of the hand-written example (free text, API call, ranking) asks with the templates
    custom's card names, filled from the rows of tests/data/custom_example."""
    from perseval.benchmarks import action_judges, actions, rankings
    folder = REPO / "tests" / "data" / "custom_example"
    bench = benchmark_class("custom")(benchmark_class("custom").Params())
    data = build_all(bench, sample=6, seed=1, source=folder)
    rows = {r["instance_id"]: r for r in map(json.loads, (folder / "instances.jsonl").read_text().splitlines())}
    kinds = set()
    for inst in data.instances:
        row, shown = rows[inst.instance_id], [d.text for d in data.documents if d.owner == inst.user_id][:k]
        messages = sent("rag", inst, history_context(data, bench.request_format), top_k=k, passage_chars=None)
        if "candidates" in row:
            cards = "\n".join(rankings.candidate_line(c) for c in inst.payload["candidates"])
            parts = [rankings.QUERY_TEMPLATE.format(query=row["query"]),
                     rankings.CANDIDATES_TEMPLATE.format(candidates=cards),
                     rankings.FINAL_TEMPLATE.format(k=min(5, len(row["candidates"])))]
            if shown:
                parts.insert(0, rankings.ACTIVITY_TEMPLATE.format(activity="\n".join(f"- {t}" for t in shown)))
            assert messages == [{"role": "system", "content": rankings.SYSTEM},
                                {"role": "user", "content": "\n\n".join(parts)}]
        else:
            passages = "\n".join(actions.PASSAGE_TEMPLATE.format(i=i, text=t) for i, t in enumerate(shown, 1))
            history = actions.HISTORY_TEMPLATE.format(passages=passages) if shown else ""
            api = row.get("api")
            if api:
                fixed = api.get("task_fixed", {})
                slots = "\n".join(actions.SLOT_TEMPLATE.format(name=s["name"], allowed=" | ".join(s.get("values") or [])
                                                               or s.get("type") or "string")
                                  for s in api["slots"] if s["name"] not in fixed)
                user = actions.API_TEMPLATE.format(history=history, task=row["query"], api=api["name"], slots=slots)
            else:
                user = actions.GENERATE_TEMPLATE.format(history=history, task=row["query"])
            assert messages == [{"role": "system", "content": actions.AGENT_SYSTEM}, {"role": "user", "content": user}]
        kinds.add("rank" if "candidates" in row else "api" if row.get("api") else "text")
    assert kinds == {"text", "api", "rank"}
    shared = {v for m in (actions, action_judges, rankings) for v in vars(m).values() if isinstance(v, str)}
    assert set(card_of("custom").prompts.values()) <= shared  # the card names the shared texts, no copy
