"""APeB thin slice: log construction, session mining, candidates, rule scoring, direct and oracle agents."""
import asyncio
import json
from dataclasses import asdict
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from perseval.agents.base import AgentContext
from perseval.benchmarks.apeb.agents.direct import APeBDirect
from perseval.benchmarks.apeb.agents.oracle import APeBOracle
from perseval.benchmarks.apeb.benchmark import APeB
from perseval.benchmarks.apeb.judges.ranking import METRICS, RankingJudge
from perseval.benchmarks.apeb.logs import Event, generate_logs
from perseval.benchmarks.apeb.sessions import (MiningConfig, hard_candidates, mine_sessions, random_candidates,
                                               split_sessions)
from perseval.config import AgentConfig, load_config
from perseval.errors import ConfigError, InputError
from perseval.records import AgentOutput, Passage
from perseval.judges.base import JudgeBinding
from perseval.registry import agent_class, benchmark_class, judge_class
from tests.scripted import ScriptedChat

ROOT = Path(__file__).resolve().parents[1]
SEED = 3
N_USERS = 30


@pytest.fixture(scope="module")
def logs():
    return generate_logs(N_USERS, SEED)


@pytest.fixture(scope="module")
def mined(logs):
    return mine_sessions(logs.events, MiningConfig())


@pytest.fixture(scope="module")
def data():
    return APeB().build(sample=12, seed=SEED, source=None)


def _rows(d):
    return [asdict(x) for x in d.instances], [asdict(x) for x in d.documents]


def _norm(q):
    return " ".join(q.lower().split())


def _ctx(data, llm=None, retrieve=None):
    by_owner = {}
    for doc in data.documents:
        by_owner.setdefault(doc.owner, []).append(doc)

    async def no_retrieve(owner, query, k):
        raise AssertionError("retrieve must not be called")

    return AgentContext(llm=llm, retrieve=retrieve or no_retrieve, documents=lambda o: by_owner.get(o, []))


def _act(agent, inst, ctx):
    return asyncio.run(agent.act(inst, ctx, 0, "agent-under-test"))


def _scores(judge, inst, out):
    judgments = asyncio.run(judge.judge(inst, out, JudgeBinding("apeb.ranking")))
    return {s.metric: s for s in judge.score(inst, out, judgments)}, judgments


# -- construction ------------------------------------------------------------------------------------


def test_build_is_deterministic_for_a_seed(data):
    again = APeB().build(sample=12, seed=SEED, source=None)
    assert _rows(again) == _rows(data)
    other = APeB().build(sample=12, seed=SEED + 1, source=None)
    assert _rows(other) != _rows(data)


def test_larger_sample_extends_a_smaller_one(data):
    bigger = APeB().build(sample=14, seed=SEED, source=None)
    assert [asdict(i) for i in bigger.instances[: len(data.instances)]] == _rows(data)[0]


def test_kept_sessions_obey_delta_and_non_triviality(mined):
    assert len(mined.sessions) == N_USERS
    for s in mined.sessions:
        assert s.events[0].kind == "search" and s.events[-1].kind == "order"
        assert s.end - s.start <= timedelta(minutes=30)
        assert [e.kind for e in s.events[:-1]].count("order") == 0
        assert _norm(s.intent_query) != _norm(s.refined_query)
        assert len(s.viewed) >= 3
        assert s.category == s.intent_category


def test_each_decoy_is_filtered_for_its_own_reason(logs, mined):
    planted = {}
    for u in logs.users:
        for kind in u.decoys:
            planted[kind] = planted.get(kind, 0) + 1
    assert set(planted) == {"no_reformulation", "order_outside_delta", "few_browsed", "intent_mismatch"}
    assert mined.counts["order_outside_delta"] == planted["order_outside_delta"]
    for reason in ("no_reformulation", "few_browsed", "intent_mismatch"):
        assert mined.counts[f"filtered_{reason}"] == planted[reason], reason
    assert mined.counts["sessions_found"] == N_USERS + sum(planted.values()) - planted["order_outside_delta"]


def test_purchase_reflects_latent_preference(logs, mined):
    users = {u.user_id: u for u in logs.users}
    for s in mined.sessions:
        u = users[s.user_id]
        assert s.purchased == u.target
        pref = u.prefs[s.category]
        utilities = {pid: pref.utility(logs.catalog.by_id[pid]) for pid in s.viewed}
        assert max(utilities, key=utilities.get) == s.purchased
        assert sorted(utilities.values()).count(utilities[s.purchased]) == 1  # a unique best


def test_history_is_strictly_before_the_search_and_within_60_days(logs, mined):
    excluded_old = excluded_later = 0
    for s in mined.sessions:
        floor = s.start - timedelta(days=60)
        assert s.history and all(floor <= e.ts < s.start for e in s.history)
        outside = [e for e in logs.events[s.user_id] if e not in s.history]
        excluded_old += sum(e.ts < floor for e in outside)
        excluded_later += sum(e.ts > s.end for e in outside)
        # Everything in the window is in the history: the cut drops nothing it should keep.
        assert len(s.history) == sum(floor <= e.ts < s.start for e in logs.events[s.user_id])
    assert excluded_old > 0 and excluded_later > 0  # both cuts actually had something to cut


def test_split_sessions_anchors_on_the_earliest_search_within_delta():
    t0 = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)

    def ev(minutes, kind, text="", pid=""):
        return Event(t0 + timedelta(minutes=minutes), kind, pid, text, "coffee")

    events = [ev(-50, "search", "too early"), ev(0, "search", "vague"), ev(5, "view", pid="p1"),
              ev(10, "search", "explicit"), ev(25, "order", pid="p1"),  # a session from minute 0
              ev(100, "search", "q"), ev(135, "order", pid="p2"),  # order 35 min after the search
              ev(200, "order", pid="p3")]  # no search since the last order
    counts = Counter()
    sessions = split_sessions("u", events, timedelta(minutes=30), counts)
    assert len(sessions) == 1 and sessions[0].queries == ["vague", "explicit"]
    assert sessions[0].start == t0 and sessions[0].purchased == "p1"
    assert counts == {"order_outside_delta": 1, "order_without_search": 1}
    assert len(split_sessions("u", events, timedelta(minutes=40), Counter())) == 2  # Delta is a parameter


def test_hard_candidates_hold_the_purchase_and_the_viewed_products(logs, mined):
    for s in mined.sessions:
        hard = hard_candidates(s, logs.catalog, SEED)
        assert s.purchased in hard and set(s.viewed) <= set(hard)
        assert len(hard) == len(set(hard)) >= 10
        assert {logs.catalog.by_id[p].category for p in hard} == {s.category}
        assert hard == hard_candidates(s, logs.catalog, SEED)  # seeded shuffle
    positions = {hard_candidates(s, logs.catalog, SEED).index(s.purchased) for s in mined.sessions}
    assert len(positions) > 3  # shuffled: the purchase is not always in the same slot


def test_random_candidates(logs, mined):
    for s in mined.sessions[:10]:
        rnd = random_candidates(s, logs.catalog, SEED, 10)
        assert s.purchased in rnd and len(set(rnd)) == 10
    cats = {logs.catalog.by_id[p].category for s in mined.sessions for p in random_candidates(s, logs.catalog, SEED)}
    assert len(cats) > 3


def test_instances_documents_and_info(data):
    assert len(data.instances) == 2 * 12
    by_user = {}
    for inst in data.instances:
        by_user.setdefault(inst.user_id, {})[inst.payload["query_level"]] = inst
        assert inst.instance_id == f"apeb-{inst.user_id}-{inst.payload['query_level']}"
        ids = [c["id"] for c in inst.payload["candidates"]]
        assert inst.gold["purchased"] in ids
        assert inst.group == inst.gold["session"]["category"]
        assert set(inst.payload["candidates"][0]) == {"id", "title", "brand", "price", "category"}
        assert inst.public().gold == {}
    for levels in by_user.values():
        assert levels["intent"].query != levels["refined"].query
        assert levels["intent"].query == levels["intent"].gold["session"]["queries"][0]
        assert levels["refined"].query == levels["refined"].gold["session"]["queries"][-1]
    starts = {i.user_id: i.gold["session"]["start"] for i in data.instances}
    assert data.documents and all(d.timestamp < starts[d.owner] for d in data.documents)
    assert {d.meta["event"] for d in data.documents} >= {"view", "video", "live", "search"}
    assert any(d.text.startswith("viewed: ") and "$" in d.text for d in data.documents)
    info = data.info
    assert info["users_generated"] == 12 and info["sessions_kept"] == 12 and info["instances"] == 24
    assert info["sessions_found"] > info["sessions_kept"]
    assert sum(v for k, v in info.items() if k.startswith("filtered_")) > 0


def test_params_change_the_construction():
    one_level = APeB({"query_levels": ["refined"], "candidates": "random"}).build(sample=4, seed=1, source=None)
    assert [i.payload["query_level"] for i in one_level.instances] == ["refined"] * 4
    assert all(len(i.payload["candidates"]) == 10 for i in one_level.instances)
    tight = APeB({"delta_minutes": 2}).build(sample=4, seed=1, source=None)
    assert tight.info["sessions_kept"] == 0 and tight.instances == []
    picky = APeB({"min_browsed": 100}).build(sample=4, seed=1, source=None)
    assert picky.info["sessions_kept"] == 0 and picky.info["filtered_few_browsed"] >= 4


def test_bad_params_and_source_are_reported():
    with pytest.raises(ConfigError, match="candidates"):
        APeB({"candidates": "easy"})
    with pytest.raises(ConfigError, match="canddiates"):
        APeB({"canddiates": "hard"})
    with pytest.raises(InputError, match="not supported"):
        APeB().build(sample=2, seed=0, source=Path("/data/apeb"))


# -- scoring -----------------------------------------------------------------------------------------


def _output(inst, ranking, status="ok"):
    return AgentOutput(inst.instance_id, "a", 0, json.dumps({"ranking": ranking}),
                       parsed={"ranking": ranking} if ranking is not None else None, status=status)


def test_judge_and_score_a_rank_two_answer(data):
    bench, inst = RankingJudge(), data.instances[0]
    ids = [c["id"] for c in inst.payload["candidates"]]
    others = [i for i in ids if i != inst.gold["purchased"]]
    scores, judgments = _scores(bench, inst, _output(inst, [others[0], inst.gold["purchased"], *others[1:4]]))
    assert [j.item_id for j in judgments] == list(METRICS)
    assert all(j.judge == "apeb.ranking" and j.kind == "rank" and j.status == "scored" for j in judgments)
    assert {m: s.value for m, s in scores.items()} == {"hit@1": 0.0, "hit@5": 100.0, "mrr": 50.0}
    assert all(s.group == inst.group and s.n_items == 1 for s in scores.values())
    miss, _ = _scores(bench, inst, _output(inst, others[:5]))
    assert {m: s.value for m, s in miss.items()} == {"hit@1": 0.0, "hit@5": 0.0, "mrr": 0.0}


@pytest.mark.parametrize("ranking,status", [(None, "invalid"), ("six", "ok"), ("dup", "ok"), ("unknown", "ok"),
                                            ("ok", "failed")])
def test_unusable_outputs_are_scored_misses(data, ranking, status):
    bench, inst = RankingJudge(), data.instances[0]
    gold = inst.gold["purchased"]
    ids = [gold, *[c["id"] for c in inst.payload["candidates"] if c["id"] != gold]]
    rankings = {None: None, "six": ids[:6], "dup": [gold, gold, *ids[1:4]], "unknown": [gold, "p9999", *ids[1:4]],
                "ok": ids[:5]}
    scores, judgments = _scores(bench, inst, _output(inst, rankings[ranking], status))
    assert all(s.value == 0.0 and s.n_unscored == 0 for s in scores.values())
    assert all("invalid" in j.feedback for j in judgments)


# -- agents ------------------------------------------------------------------------------------------


def _ids(inst):
    return [c["id"] for c in inst.payload["candidates"]]


def test_direct_agent_valid_answer_uses_history_and_schema(data):
    inst = data.instances[0]
    ids = _ids(inst)
    chat = ScriptedChat(json.dumps({"ranking": ids[:5]}))
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "ok" and out.parsed == {"ranking": ids[:5]}
    assert (out.prompt_tokens, out.completion_tokens) == (10, 5) and len(chat.calls) == 1
    schema = chat.calls[0]["json_schema"]["properties"]["ranking"]
    assert schema["items"]["enum"] == ids and schema["minItems"] == schema["maxItems"] == 5
    prompt = chat.calls[0]["messages"][-1]["content"]
    history = [d for d in data.documents if d.owner == inst.user_id]
    assert history[-1].text in prompt and inst.query in prompt and all(i in prompt for i in ids)
    assert sum(line.startswith("- 2025-") for line in prompt.splitlines()) == min(30, len(history)) > 0


def test_history_items_limits_the_history_lines(data):
    inst = data.instances[0]
    chat = ScriptedChat(json.dumps({"ranking": _ids(inst)[:5]}))
    _act(APeBDirect({"history_items": 5}), inst, _ctx(data, chat))
    lines = [x for x in chat.calls[0]["messages"][-1]["content"].splitlines() if x.startswith("- 2025-")]
    history = [d for d in data.documents if d.owner == inst.user_id]
    assert len(lines) == 5 and lines[-1].endswith(history[-1].text) and lines[0].endswith(history[-5].text)


def test_no_history_agent_leaves_history_out(data):
    inst = data.instances[0]
    chat = ScriptedChat(json.dumps({"ranking": _ids(inst)[:5]}))
    _act(APeBDirect({"use_history": False}), inst, _ctx(data, chat))
    prompt = chat.calls[0]["messages"][-1]["content"]
    assert "activity" not in prompt
    assert not any(d.text in prompt for d in data.documents if d.owner == inst.user_id and d.meta["event"] == "video")


def test_direct_agent_retrieves_when_asked(data):
    inst = data.instances[0]
    seen = []

    async def retrieve(owner, query, k):
        seen.append((owner, query, k))
        return [Passage("d1", 0, "watched video: Review of a marker passage", 0.9)]

    chat = ScriptedChat(json.dumps({"ranking": _ids(inst)[:5]}))
    _act(APeBDirect({"retrieve_k": 4}), inst, _ctx(data, chat, retrieve))
    assert seen == [(inst.user_id, inst.query, 4)]
    assert "marker passage" in chat.calls[0]["messages"][-1]["content"]


def test_direct_agent_repairs_duplicates_and_unknown_ids(data):
    inst = data.instances[0]
    ids = _ids(inst)
    chat = ScriptedChat(json.dumps({"ranking": [ids[0], ids[0], "p9999", *ids[1:5], ids[5]]}))
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "ok" and out.parsed == {"ranking": ids[:5]} and len(chat.calls) == 1
    repair = out.trace[-1]["repair"]
    assert repair == {"dropped_unknown": ["p9999"], "dropped_duplicate": [ids[0]], "dropped_extra": [ids[5]]}


def test_direct_agent_retries_once_when_too_few_ids(data):
    inst = data.instances[0]
    ids = _ids(inst)
    chat = ScriptedChat([json.dumps({"ranking": ids[:3]}), f"Sure! ```json\n{json.dumps({'ranking': ids[2:7]})}\n```"])
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "ok" and out.parsed == {"ranking": ids[2:7]} and len(chat.calls) == 2
    second = chat.calls[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": json.dumps({"ranking": ids[:3]})}
    assert "exactly 5" in second[-1]["content"]
    assert (out.prompt_tokens, out.completion_tokens) == (20, 10)


def test_direct_agent_marks_garbage_invalid_after_one_retry(data):
    inst = data.instances[0]
    chat = ScriptedChat("I think the blue one is nice.")
    out = _act(APeBDirect(), inst, _ctx(data, chat))
    assert out.status == "invalid" and out.parsed is None and len(chat.calls) == 2
    assert out.text == "I think the blue one is nice." and out.error
    scores, _ = _scores(RankingJudge(), inst, out)
    assert scores["hit@5"].value == 0.0


def test_direct_agent_records_failed_requests(data):
    out = _act(APeBDirect(), data.instances[0], _ctx(data, ScriptedChat([None])))
    assert out.status == "failed" and out.error == "scripted failure"
    with pytest.raises(ConfigError):
        APeBDirect({"use_hisotry": False})


def test_oracle_beats_a_first_five_baseline(data):
    bench, oracle, baseline = RankingJudge(), APeBOracle(), APeBDirect({"use_history": False})
    hits = {"oracle": [], "baseline": []}
    for inst in data.instances:
        out = _act(oracle, inst, _ctx(data))
        assert out.parsed["ranking"][0] == inst.gold["purchased"] and len(set(out.parsed["ranking"])) == 5
        hits["oracle"].append(_scores(bench, inst, out)[0]["hit@1"].value)
        chat = ScriptedChat(json.dumps({"ranking": _ids(inst)[:5]}))
        out = _act(baseline, inst.public(), _ctx(data, chat))
        hits["baseline"].append(_scores(bench, inst, out)[0]["hit@1"].value)
    assert sum(hits["oracle"]) / len(hits["oracle"]) == 100.0
    assert sum(hits["baseline"]) / len(hits["baseline"]) < 50.0


def test_registry_and_agent_yaml(data):
    assert benchmark_class("apeb") is APeB and judge_class("apeb.ranking") is RankingJudge
    assert APeB.rule_judges == ("apeb.ranking",) and not RankingJudge.uses_llm
    agents = {}
    for name in ("apeb-direct", "apeb-no-history", "apeb-oracle"):
        cfg = load_config(AgentConfig, ROOT / "configs" / "agents" / f"{name}.yaml")
        assert cfg.name == name
        agents[name] = agent_class(cfg.kind)(cfg.params)
    assert isinstance(agents["apeb-oracle"], APeBOracle) and agents["apeb-oracle"].reads_gold
    assert agents["apeb-direct"].params.use_history is True
    assert agents["apeb-no-history"].params.use_history is False
    assert agents["apeb-direct"].requires() == {"llm", "documents"}
    assert agents["apeb-no-history"].requires() == {"llm"} and agents["apeb-oracle"].requires() == set()
    assert "apeb" in APeBDirect.benchmarks and "apeb" in APeBOracle.benchmarks


def test_default_stats_count_instances_users_and_history_per_group(data):
    (table,) = APeB().stats(data.instances, data.documents).values()
    assert table["instances"].sum() == len(data.instances) and table["users"].sum() == 12
    assert table["history_documents"].sum() == len(data.documents)
