"""APeB systems: the exactly-5 contract, direct ranking, VQRA, ReAct (native tools, text fallback, JSON
steps, step budget), and the model-free systems (oracle, random, the personalized-search baseline) with the
ranking judge. History search runs on a real BM25 index (bm25s) of the generated histories."""
import asyncio
import json
from pathlib import Path
from statistics import mean

import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.apeb.agents.direct import APeBDirect
from perseval.benchmarks.apeb.agents.oracle import APeBOracle
from perseval.benchmarks.apeb.agents.pps import APeBPersonalizedSearch
from perseval.benchmarks.apeb.agents.random_ranker import APeBRandom
from perseval.benchmarks.apeb.agents.react import APeBReact
from perseval.benchmarks.apeb.agents.react_tools import parse_action
from perseval.benchmarks.apeb.agents.vqra import APeBVqra
from perseval.benchmarks.apeb.answers import ranking_output
from perseval.benchmarks.rankings import check_ranking, extract, parse_ranking
from perseval.benchmarks.apeb.benchmark import APeB
from perseval.benchmarks.apeb.judges.ranking import ApebRankingJudge
from perseval.experiment.config import AgentConfig, load_config
from perseval.core.errors import ConfigError
from perseval.judges.base import JudgeBinding
from perseval.llm.base import ChatResult
from perseval.core.instances import AgentOutput
from perseval.kernel.registry import agent_class, judge_class
from perseval.retrieval.bm25 import BM25Retriever
from tests.scripted import ScriptedChat

from .conftest import shipped_config

ROOT = Path(__file__).resolve().parents[1]
SEED = 3


@pytest.fixture(scope="module")
def data():
    return APeB().build(sample=12, seed=SEED, source=None)


@pytest.fixture(scope="module")
def searcher(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bm25")
    retriever = BM25Retriever()
    retriever.build(data.documents, folder)
    return retriever.open(folder)


def _ctx(data, llm=None, searcher=None):
    by_owner = {}
    for doc in data.documents:
        by_owner.setdefault(doc.owner, []).append(doc)

    async def retrieve(owner, query, k):
        assert searcher is not None, "retrieve must not be called"
        return searcher.search(owner, query, k)

    return AgentContext(llm=llm, retrieve=retrieve, documents=lambda o: by_owner.get(o, []))


def _act(agent, inst, ctx, repeat=0):
    return asyncio.run(agent.act(inst.public() if not agent.reads_gold else inst, ctx, repeat, "agent-under-test"))


def _ids(inst):
    return [c["id"] for c in inst.payload["candidates"]]


def _hit1(inst, out):
    judgments = asyncio.run(ApebRankingJudge().judge(inst, out, JudgeBinding("apeb.ranking")))
    return {j.item_id: j.score for j in judgments}["hit@1"]


def _pick(data, level="intent", cset="hard"):
    return next(i for i in data.instances if i.payload["query_level"] == level and i.payload["candidate_set"] == cset)


# -- the contract (answers.py) -----------------------------------------------------------------------


def test_repair_rule_on_crafted_outputs(data):
    inst = _pick(data)
    ids = _ids(inst)
    crafted = json.dumps({"ranking": [ids[0], ids[0], "p99999", 7, {"id": ids[1]}, *ids[2:5], ids[5]]})
    answer = parse_ranking(crafted, ids)
    assert answer.ranking == ids[:5] and answer.repaired
    assert answer.repairs() == {"dropped_unknown": ["p99999", "7"], "dropped_duplicate": [ids[0]],
                                "dropped_extra": [ids[5]]}
    fenced = extract(inst, f"Here you go:\n```json\n{json.dumps(ids[:5])}\n```")
    assert fenced.parsed == {"ranking": ids[:5]} and not fenced.problem and not fenced.repairs
    short = extract(inst, json.dumps({"ranking": ids[:3] + ["nope"]}))
    assert short.problem == "3 usable candidate ids, 5 needed" and short.parsed == {"ranking": ids[:3]}
    assert extract(inst, "I like the second one").problem  # nothing readable: a problem, nothing invented


def test_check_ranking_is_strict_on_what_was_submitted(data):
    inst = _pick(data)
    ids = _ids(inst)

    def out(ranking, status="ok"):
        return AgentOutput(inst.instance_id, "a", 0, "", parsed={"ranking": ranking}, status=status)

    assert check_ranking(inst, out(ids[:5])) == (ids[:5], "")
    for bad in (ids[:6], ids[:4], [ids[0]] * 5, ids[:4] + ["p99999"]):
        assert check_ranking(inst, out(bad))[0] is None
    assert check_ranking(inst, out(ids[:5], "failed"))[1].startswith("status failed")
    made = ranking_output(inst, "sys", 0, list(reversed(ids)))
    assert made.status == "ok" and made.parsed == {"ranking": list(reversed(ids))[:5]}
    assert ranking_output(inst, "sys", 0, ids[:2]).status == "invalid"


# -- direct ranking ----------------------------------------------------------------------------------


def test_direct_agent_prompt_history_and_schema(data):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ScriptedChat(json.dumps({"ranking": ids[:5]}))
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "ok" and out.parsed == {"ranking": ids[:5]} and len(chat.calls) == 1
    schema = chat.calls[0]["json_schema"]["properties"]["ranking"]
    assert schema["items"]["enum"] == ids and schema["minItems"] == schema["maxItems"] == 5
    prompt = chat.calls[0]["messages"][-1]["content"]
    history = [d for d in data.documents if d.owner == inst.user_id]
    assert history[-1].text in prompt and inst.query in prompt and all(i in prompt for i in ids)
    assert sum(line.startswith("- 2025-") for line in prompt.splitlines()) == min(30, len(history))
    no_history = ScriptedChat(json.dumps({"ranking": ids[:5]}))
    _act(APeBDirect({"use_history": False}), inst, _ctx(data, no_history))
    assert "activity" not in no_history.calls[0]["messages"][-1]["content"]


def test_direct_agent_retrieves_when_asked(data, searcher):
    inst = _pick(data)
    chat = ScriptedChat(json.dumps({"ranking": _ids(inst)[:5]}))
    _act(APeBDirect({"retrieve_k": 4}), inst, _ctx(data, chat, searcher))
    prompt = chat.calls[0]["messages"][-1]["content"]
    expected = searcher.search(inst.user_id, inst.query, 4)
    assert expected and all(p.text in prompt for p in expected)


def test_direct_agent_corrects_once_then_marks_invalid(data):
    inst = _pick(data)
    ids = _ids(inst)
    # a small model repeating an id: the correction keeps the 4 usable ids and asks for 1 more, among the rest
    chat = ScriptedChat([json.dumps({"ranking": [ids[0], ids[1], ids[1], ids[2], ids[3]]}),
                         json.dumps({"ranking": [ids[0]]}), json.dumps({"ranking": [ids[6]]})])
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "invalid" and len(chat.calls) == 2  # ids[0] was used already: still 4 usable ids
    second = chat.calls[1]
    assert second["json_schema"]["properties"]["ranking"]["items"]["enum"] == ids[4:]
    assert second["json_schema"]["properties"]["ranking"]["maxItems"] == 1
    assert f"kept, in this order: {', '.join(ids[:4])}. Add the 1 next most likely" in second["messages"][-1]["content"]
    assert out.trace[1]["repair"] == {"dropped_unknown": [ids[0]], "dropped_duplicate": [], "dropped_extra": []}
    chat = ScriptedChat([json.dumps({"ranking": [ids[0], ids[1], ids[1], ids[2], ids[3]]}),
                         json.dumps({"ranking": [ids[6]]})])
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "ok" and out.parsed == {"ranking": [*ids[:4], ids[6]]} and len(chat.calls) == 2
    assert out.text == json.dumps({"ranking": [*ids[:4], ids[6]]}) and (out.prompt_tokens, out.completion_tokens) == (20, 10)
    garbage = _act(APeBDirect(), inst, _ctx(data, ScriptedChat("I think the blue one is nice.")))
    assert garbage.status == "invalid" and garbage.parsed is None and garbage.text == "I think the blue one is nice."
    assert _hit1(inst, garbage) == 0.0
    failed = _act(APeBDirect(), inst, _ctx(data, ScriptedChat([None])))
    assert failed.status == "failed" and failed.error == "scripted failure"


# -- VQRA --------------------------------------------------------------------------------------------


def test_vqra_refines_with_history_then_ranks_with_the_refined_query(data):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ScriptedChat([json.dumps({"refined_query": "premium waterproof trail shoes"}),
                         json.dumps({"ranking": ids[:5]})])
    out = _act(APeBVqra(), inst, _ctx(data, chat))
    assert out.status == "ok" and len(chat.calls) == 2
    refine_prompt = chat.calls[0]["messages"][-1]["content"]
    assert inst.query in refine_prompt and "activity" in refine_prompt
    assert chat.calls[0]["json_schema"]["required"] == ["refined_query"]
    rank_prompt = chat.calls[1]["messages"][-1]["content"]
    assert "premium waterproof trail shoes" in rank_prompt and inst.query in rank_prompt
    assert out.trace[0]["refined_query"] == "premium waterproof trail shoes"
    assert (out.prompt_tokens, out.completion_tokens) == (20, 10)


def test_vqra_falls_back_to_the_query_and_records_failures(data):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ScriptedChat(["no idea", json.dumps({"ranking": ids[:5]})])
    out = _act(APeBVqra(), inst, _ctx(data, chat))
    assert out.status == "ok" and "fallback" in out.trace[0]
    assert "most likely want" not in chat.calls[1]["messages"][-1]["content"]
    failed = _act(APeBVqra(), inst, _ctx(data, ScriptedChat([None])))
    assert failed.status == "failed" and failed.trace[0]["status"] == "failed"
    assert APeBVqra({"use_history": False}).requires() == {"llm", "documents"}  # refinement reads history


def test_vqra_can_hand_the_refined_query_to_react(data, searcher):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ScriptedChat([json.dumps({"refined_query": "explicit need"}),
                         json.dumps({"thought": "done", "tool": "finish", "arguments": {"ranking": ids[:5]}})])
    agent = APeBVqra({"ranker": "react", "react": {"tool_calling": "json"}})
    assert agent.requires() == {"llm", "documents", "retrieve"}
    out = _act(agent, inst, _ctx(data, chat, searcher))
    assert out.status == "ok" and [t["step"] for t in out.trace] == ["refine", "act"]
    assert "explicit need" in chat.calls[1]["messages"][1]["content"]


# -- ReAct -------------------------------------------------------------------------------------------


class ToolChat(ScriptedChat):
    """ScriptedChat whose replies may carry native tool calls: script items are text or (text, calls)."""

    def __init__(self, script):
        super().__init__("")
        self.script = script

    async def chat(self, messages, *, json_schema=None, max_tokens=None, temperature=None, repeat=0, tools=None):
        self.calls.append({"messages": list(messages), "json_schema": json_schema, "tools": tools})
        item = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        if item is None:
            return ChatResult(text="", status="failed", error="scripted failure")
        text, calls = item if isinstance(item, tuple) else (item, [])
        return ChatResult(text=text, prompt_tokens=10, completion_tokens=5, tool_calls=calls)


def call(name, args, i=0):
    return {"id": f"c{i}", "name": name, "arguments": json.dumps(args)}


def test_react_native_tool_calls_end_in_an_accepted_finish(data, searcher):
    inst = _pick(data)
    ids = _ids(inst)
    brand = next(c["brand"] for c in inst.payload["candidates"] if c["id"] == inst.gold["purchased"])  # in history
    chat = ToolChat([("", [call("search_history", {"query": brand})]),
                     ("", [call("product_details", {"product_id": ids[0]}, 1)]),
                     ("", [call("compare", {"product_ids": ids[:3]}, 2)]),
                     ("", [call("finish", {"ranking": ids[:3]}, 3)]),  # too few: rejected, costs a step
                     ("", [call("finish", {"ranking": ids[1:6]}, 4)])])
    out = _act(APeBReact(), inst, _ctx(data, chat, searcher))
    assert out.status == "ok" and out.parsed == {"ranking": ids[1:6]} and len(chat.calls) == 5
    acts = [t for t in out.trace if t["step"] == "act"]
    assert [a["tool"] for a in acts] == ["search_history", "product_details", "compare", "finish", "finish"]
    expected = searcher.search(inst.user_id, brand, 5)
    assert expected and expected[0].text in acts[0]["observation"]
    assert ids[0] in acts[1]["observation"] and "brand in" in acts[1]["observation"]
    assert all(i in acts[2]["observation"] for i in ids[:3])
    assert acts[3]["observation"].startswith("finish rejected: 3 usable candidate ids, 5 needed")
    assert chat.calls[0]["tools"][-1]["function"]["name"] == "finish"
    last = chat.calls[-1]["messages"]
    assert last[-1]["role"] == "tool" and last[-1]["tool_call_id"] == "c3" and last[-2]["tool_calls"]
    assert out.prompt_tokens == 50


def test_react_reads_text_actions_when_the_server_has_no_tool_calling(data, searcher):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ToolChat(["Thought: check the history.\nAction: search_history\nAction Input: running",
                     "I am not sure what to do.",
                     json.dumps({"tool": "product_details", "arguments": {"product_id": ids[2]}}),
                     json.dumps({"ranking": ids[4:9] if len(ids) >= 9 else ids[:5]})])
    out = _act(APeBReact(), inst, _ctx(data, chat, searcher))
    assert out.status == "ok" and len(chat.calls) == 4
    steps = [(t["step"], t.get("tool"), t.get("via")) for t in out.trace]
    assert steps == [("act", "search_history", "text"), ("think", None, None), ("act", "product_details", "text"),
                     ("act", "finish", "text")]
    assert out.trace[0]["arguments"] == {"query": "running"} and out.trace[0]["thought"] == "check the history."
    second = chat.calls[1]["messages"]
    assert second[-1]["role"] == "user" and second[-1]["content"].startswith("Observation: ")
    assert "No tool call found" in chat.calls[2]["messages"][-1]["content"]


def test_react_json_mode_constrains_each_step(data, searcher):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ToolChat([json.dumps({"thought": "compare two", "tool": "compare", "arguments": {"product_ids": ids[:2]}}),
                     json.dumps({"thought": "pick", "tool": "finish", "arguments": {"ranking": ids[:5]}})])
    out = _act(APeBReact({"tool_calling": "json"}), inst, _ctx(data, chat, searcher))
    assert out.status == "ok" and chat.calls[0]["tools"] is None
    options = chat.calls[0]["json_schema"]["anyOf"]
    assert [o["properties"]["tool"]["const"] for o in options] == ["search_history", "product_details", "compare",
                                                                  "finish"]
    finish = options[-1]["properties"]["arguments"]["properties"]["ranking"]
    assert finish["items"]["enum"] == ids and finish["minItems"] == finish["maxItems"] == 5


def test_react_step_budget_forces_a_final_answer(data, searcher):
    inst = _pick(data)
    ids = _ids(inst)
    chat = ToolChat([("", [call("search_history", {"query": "x"})]), ("", [call("dance", {}, 1)]),
                     json.dumps({"ranking": ids[:5]})])
    out = _act(APeBReact({"max_steps": 2}), inst, _ctx(data, chat, searcher))
    assert out.status == "ok" and out.parsed == {"ranking": ids[:5]} and len(chat.calls) == 3
    assert [t["step"] for t in out.trace] == ["act", "act", "budget", "answer"]
    assert "unknown tool 'dance'" in out.trace[1]["observation"]
    final = chat.calls[-1]
    assert final["tools"] is None and final["json_schema"]["properties"]["ranking"]["minItems"] == 5
    assert "step budget is used up" in final["messages"][-1]["content"]
    failed = _act(APeBReact(), inst, _ctx(data, ToolChat([None]), searcher))
    assert failed.status == "failed" and failed.trace[-1]["status"] == "failed"


def test_parse_action_forms():
    assert parse_action('{"tool": "compare", "arguments": {"product_ids": ["a", "b"]}}') == \
        ("compare", {"product_ids": ["a", "b"]}, "")
    assert parse_action('{"name": "search_history", "query": "red"}') == ("search_history", {"query": "red"}, "")
    assert parse_action('Action: product_details\nAction Input: "p1"') == ("product_details", {"product_id": "p1"}, "")
    assert parse_action('{"ranking": ["a"]}')[:2] == ("finish", {"ranking": ["a"]})
    assert parse_action("hello there") is None


# -- model-free systems ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big():
    return APeB().build(sample=60, seed=SEED, source=None)


def test_oracle_ranks_the_purchase_first(big):
    outs = [_act(APeBOracle(), inst, AgentContext()) for inst in big.instances]
    assert mean(_hit1(i, o) for i, o in zip(big.instances, outs)) == 100.0


def test_random_ranker_is_near_chance(big):
    hits = [_hit1(i, _act(APeBRandom(), i, AgentContext())) for i in big.instances]
    chance = mean(100.0 / len(i.payload["candidates"]) for i in big.instances)
    assert abs(mean(hits) - chance) < 6.0  # 240 instances: the standard error is about 2 points
    again = [_act(APeBRandom(), i, AgentContext()).parsed for i in big.instances[:5]]
    assert again == [_act(APeBRandom(), i, AgentContext()).parsed for i in big.instances[:5]]  # seeded


def test_personalized_search_baseline_beats_random(big, tmp_path):
    retriever = BM25Retriever()
    retriever.build(big.documents, tmp_path)
    ctx = _ctx(big, searcher=retriever.open(tmp_path))
    pps = [_hit1(i, _act(APeBPersonalizedSearch(), i, ctx)) for i in big.instances]
    rnd = [_hit1(i, _act(APeBRandom(), i, AgentContext())) for i in big.instances]
    assert mean(pps) > mean(rnd) + 10.0
    out = _act(APeBPersonalizedSearch(), big.instances[0], ctx)
    scores = out.trace[0]["scores"]
    assert sorted(s["id"] for s in scores) == sorted(_ids(big.instances[0]))
    fused = [s["fused"] for s in scores]
    assert fused == sorted(fused, reverse=True) and out.parsed["ranking"] == [s["id"] for s in scores][:5]
    query_only = [_hit1(i, _act(APeBPersonalizedSearch({"alpha": 1.0}), i, ctx)) for i in big.instances
                  if i.payload["query_level"] == "intent" and i.payload["candidate_set"] == "hard"]
    assert mean(query_only) < mean(pps)  # a vague query alone says little: the history carries the signal


# -- registry and YAML -------------------------------------------------------------------------------


def test_agent_yamls_and_needs():
    expected = {"apeb-direct": ({"llm", "documents"}, APeBDirect), "apeb-no-history": ({"llm"}, APeBDirect),
                "apeb-oracle": (set(), APeBOracle), "apeb-random": (set(), APeBRandom),
                "apeb-react": ({"llm", "retrieve", "documents"}, APeBReact),
                "apeb-vqra": ({"llm", "documents"}, APeBVqra),
                "apeb-pps": ({"retrieve"}, APeBPersonalizedSearch)}
    for name, (needs, cls) in expected.items():
        cfg = load_config(AgentConfig, shipped_config("agents", name))
        agent = agent_class(cfg.kind)(cfg.params)
        assert cfg.name == name and isinstance(agent, cls) and agent.requires() == needs, name
        assert agent.benchmarks == ("apeb",)
    assert judge_class("apeb.ranking") is ApebRankingJudge
    with pytest.raises(ConfigError, match="tool_calling"):
        APeBReact({"tool_calling": "telepathy"})
