"""APeB data: the seeded log generator, session mining (section 2.1) on hand-made and generated logs,
candidate sets, the benchmark build and its dataset statistics."""
from collections import Counter
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from perseval.benchmarks.apeb.benchmark import APeB
from perseval.benchmarks.apeb.candidates import CandidateConfig, candidate_set, hard_candidates, random_candidates
from perseval.benchmarks.apeb.logs import Event
from perseval.benchmarks.apeb.sessions import MiningConfig, history_before, mine_sessions, split_sessions
from perseval.benchmarks.apeb.synth_catalog import CATEGORIES
from perseval.benchmarks.apeb.synth_logs import DECOY_KINDS, LogConfig, generate_logs
from perseval.core.errors import ConfigError
from perseval.experiment.load import experiment_file

SEED = 3
N_USERS = 40
T0 = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)


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


# -- hand-made logs ----------------------------------------------------------------------------------


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def search(minutes, text, category="coffee"):
    return Event(at(minutes), "search", text=text, category=category)


def product(minutes, action, pid, category="coffee"):
    return Event(at(minutes), action, "product", pid, category=category)


def video(minutes, title="a cat video"):
    return Event(at(minutes), "view", "video", text=title)


def session_events(start: float, order_at: float, queries=("coffee", "dark roast coffee beans"), n_viewed=5,
                   category="coffee", bought="p1", query_gap=1.0):
    """Searches from `start` (`query_gap` minutes apart), `n_viewed` product views, then the order of
    `bought` at `order_at`."""
    evs = [search(start + i * query_gap, q, category) for i, q in enumerate(queries)]
    evs += [product(start + len(queries) + i, "view", f"p{i + 1}", category) for i in range(n_viewed)]
    return evs + [product(order_at, "order", bought, category)]


LOOSE = MiningConfig(min_history=0, session_days=None)  # focused tests: no activity or window threshold


@pytest.mark.parametrize("minutes,kept", [(29, True), (30, True), (31, False)])
def test_delta_boundary(minutes, kept):
    # both searches at minute 0, so the order's distance to the session's searches is exactly `minutes`
    result = mine_sessions({"u": session_events(0, minutes, query_gap=0)}, LOOSE)
    assert len(result.sessions) == int(kept)
    assert result.counts["order_outside_delta"] == int(not kept)
    if kept:
        assert result.sessions[0].end - result.sessions[0].start == timedelta(minutes=minutes)
    wider = LOOSE.model_copy(update={"delta_minutes": 32})
    assert len(mine_sessions({"u": session_events(0, 31, query_gap=0)}, wider).sessions) == 1


def test_a_session_starts_at_the_earliest_search_within_delta_after_the_previous_order():
    events = [search(-50, "too early"), search(0, "vague"), product(5, "view", "p1"), search(10, "explicit"),
              product(25, "order", "p1"),  # a session from minute 0
              search(100, "q"), product(135, "order", "p2"),  # 35 minutes after its search
              product(200, "order", "p3")]  # no search since the last order
    counts = Counter()
    sessions = split_sessions("u", events, timedelta(minutes=30), counts)
    assert len(sessions) == 1 and sessions[0].queries == ["vague", "explicit"]
    assert sessions[0].start == T0 and sessions[0].purchased == "p1"
    assert counts == {"order_outside_delta": 1, "order_without_search": 1}


def test_one_session_per_user_the_latest_unless_asked_otherwise():
    events = (session_events(0, 20, bought="p1") + session_events(600, 620, bought="p2")
              + session_events(1200, 1220, queries=("coffee", "coffee")))  # the last one is trivial
    latest = mine_sessions({"u": events}, LOOSE)
    assert [s.purchased for s in latest.sessions] == ["p2"]
    assert latest.counts["extra_sessions_dropped"] == 1 and latest.counts["filtered_no_reformulation"] == 1
    earliest = mine_sessions({"u": events}, LOOSE.model_copy(update={"keep": "earliest"}))
    assert [s.purchased for s in earliest.sessions] == ["p1"]
    two_users = mine_sessions({"a": events, "b": session_events(0, 10)}, LOOSE)
    assert [s.user_id for s in two_users.sessions] == ["a", "b"]


def test_history_is_cut_exactly_at_the_search_and_60_days_back():
    t_m = at(0)
    floor = t_m - timedelta(days=60)
    before = [Event(floor - timedelta(seconds=1), "view", "video", text="61 days ago"),
              Event(floor, "view", "video", text="exactly 60 days"),
              Event(t_m - timedelta(seconds=1), "view", "video", text="a second before")]
    same_time = Event(t_m, "like", "video", text="at the search's own second")
    events = before + [same_time] + session_events(0, 20)
    events.sort(key=lambda e: e.ts)
    (s,) = mine_sessions({"u": events}, LOOSE).sessions
    assert [e.text for e in s.history] == ["exactly 60 days", "a second before"]  # not the search's own second
    assert history_before(events, t_m, 1) == [before[2]]


@pytest.mark.parametrize("change,reason", [
    ({"queries": ("coffee beans", "Coffee  beans")}, "no_reformulation"),  # same query after normalising
    ({"n_viewed": 4}, "few_browsed"),
    ({"category": "snacks"}, "intent_mismatch"),  # searching and browsing snacks, then ordering coffee
])
def test_the_non_trivial_filter(change, reason):
    events = session_events(0, 20, **change)
    if reason == "intent_mismatch":
        events[-1] = product(20, "order", "p1", "coffee")
    result = mine_sessions({"u": events}, LOOSE)
    assert result.sessions == [] and result.counts[f"filtered_{reason}"] == 1
    assert result.rejected == [("u", T0, reason)]


def test_the_filter_thresholds_are_parameters():
    events = [video(-60 - i) for i in range(9)] + session_events(0, 20, n_viewed=5)
    events.sort(key=lambda e: e.ts)
    assert mine_sessions({"u": events}, LOOSE.model_copy(update={"min_history": 9})).sessions
    sparse = mine_sessions({"u": events}, LOOSE.model_copy(update={"min_history": 10}))
    assert not sparse.sessions and sparse.counts["filtered_sparse_history"] == 1
    assert not mine_sessions({"u": events}, LOOSE.model_copy(update={"min_browsed": 6})).sessions
    with pytest.raises(ConfigError, match="delta_minutes"):
        APeB({"mining": {"delta_minutes": 0}})


def test_query_category_falls_back_to_the_products_viewed_after_it():
    untagged = [Event(e.ts, e.action, e.target, e.product_id, e.text, "" if e.action == "search" else e.category)
                for e in session_events(0, 20)]
    (s,) = mine_sessions({"u": untagged}, LOOSE).sessions
    assert s.query_categories() == ["", "coffee"]  # the first query has no view before the next search
    switched = untagged[:-1] + [product(20, "order", "p9", "snacks")]
    assert mine_sessions({"u": switched}, LOOSE).counts["filtered_intent_mismatch"] == 1


def test_intent_and_refined_queries_are_the_first_and_the_last():
    events = session_events(0, 20, queries=("something to wake me up", "coffee", "dark roast single origin beans"))
    (s,) = mine_sessions({"u": events}, LOOSE).sessions
    assert (s.intent_query, s.refined_query) == ("something to wake me up", "dark roast single origin beans")
    assert s.browsed == [f"p{i}" for i in range(1, 6)]


def test_sessions_come_from_the_last_session_days_of_the_log():
    old = session_events(0, 20)
    recent = [Event(e.ts + timedelta(days=40), e.action, e.target, e.product_id, e.text, e.category)
              for e in session_events(0, 20, bought="p2")]
    result = mine_sessions({"u": old + recent}, MiningConfig(min_history=0, session_days=30))
    assert [s.purchased for s in result.sessions] == ["p2"]
    assert result.counts["filtered_outside_session_window"] == 1


# -- generated logs ----------------------------------------------------------------------------------


def test_generator_shape(logs):
    cats = {p.category for p in logs.catalog.products}
    assert len(cats) >= 10 and len(cats) == len(CATEGORIES)
    kinds = Counter((e.action, e.target) for evs in logs.events.values() for e in evs)
    assert {("view", "video"), ("like", "video"), ("view", "live"), ("search", ""), ("view", "product"),
            ("like", "product"), ("cart", "product"), ("order", "product")} <= set(kinds)
    content = kinds[("view", "video")] + kinds[("like", "video")] + kinds[("view", "live")]
    assert content > kinds[("view", "product")]  # a content platform: mostly videos and live streams
    for evs in logs.events.values():
        assert [e.ts for e in evs] == sorted(e.ts for e in evs)
    span = max(e.ts for evs in logs.events.values() for e in evs) - min(e.ts for evs in logs.events.values() for e in evs)
    assert timedelta(days=80) < span <= timedelta(days=90)


def test_generator_is_seeded_and_extends(logs):
    again = generate_logs(N_USERS, SEED)
    assert again.events == logs.events
    assert generate_logs(N_USERS, SEED + 1).events != logs.events
    bigger = generate_logs(N_USERS + 3, SEED)
    assert all(bigger.events[u] == logs.events[u] for u in logs.events)
    small = generate_logs(3, SEED, LogConfig(per_category=12, background=(5, 10)))
    assert len(small.catalog.products) == 12 * len(CATEGORIES)


def test_every_user_keeps_the_planted_session(logs, mined):
    assert len(mined.sessions) == N_USERS
    users = {u.user_id: u for u in logs.users}
    for s in mined.sessions:
        u = users[s.user_id]
        assert s.start == u.session_start and s.purchased == u.target
        pref = u.prefs[s.category]
        utilities = {pid: pref.utility(logs.catalog.by_id[pid]) for pid in s.considered}
        assert max(utilities, key=utilities.get) == s.purchased  # the purchase is the unique best fit
        assert sorted(utilities.values()).count(utilities[s.purchased]) == 1


def test_each_planted_trivial_session_is_filtered_for_its_own_reason(logs, mined):
    rejected = {(u, t): r for u, t, r in mined.rejected}
    seen = Counter()
    for u in logs.users:
        for kind, start in u.decoys:
            seen[kind] += 1
            # an order 40-90 minutes after its search makes no session at all
            assert rejected.get((u.user_id, start)) == (None if kind == "order_outside_delta" else kind), kind
        if u.repeat_start is not None:
            assert (u.user_id, u.repeat_start) not in rejected  # non-trivial, dropped as a second session
    assert set(seen) == set(DECOY_KINDS)
    repeaters = sum(u.repeat_start is not None for u in logs.users)
    assert repeaters > 0 and mined.counts["extra_sessions_dropped"] == repeaters


def test_history_within_60_days_before_the_search(logs, mined):
    cut_old = cut_later = 0
    for s in mined.sessions:
        floor = s.start - timedelta(days=60)
        assert s.history and all(floor <= e.ts < s.start for e in s.history)
        assert len(s.history) == sum(floor <= e.ts < s.start for e in logs.events[s.user_id])
        cut_old += sum(e.ts < floor for e in logs.events[s.user_id])
        cut_later += sum(e.ts > s.end for e in logs.events[s.user_id])
    assert cut_old > 0 and cut_later > 0  # both cuts had something to cut


# -- candidate sets ----------------------------------------------------------------------------------


def test_hard_candidates_are_the_considered_products_plus_the_purchase(logs, mined):
    positions = set()
    for s in mined.sessions:
        hard = hard_candidates(s, logs.catalog, SEED)
        assert set(hard) == set(s.considered) | {s.purchased} and len(hard) == len(set(hard))
        assert hard == hard_candidates(s, logs.catalog, SEED)  # seeded
        positions.add(hard.index(s.purchased))
    assert len(positions) > 3  # shuffled: the purchase is not always in the same slot


def test_hard_padding_and_cap_are_opt_in_and_named(logs, mined):
    s = mined.sessions[0]
    base = set(hard_candidates(s, logs.catalog, SEED))
    padded = hard_candidates(s, logs.catalog, SEED, CandidateConfig(pad_to=len(base) + 4))
    assert len(padded) == len(base) + 4 and base < set(padded)
    assert {logs.catalog.by_id[p].category for p in padded} == {s.category}
    capped = hard_candidates(s, logs.catalog, SEED, CandidateConfig(max_size=5))
    assert len(capped) == 5 and s.purchased in capped and set(capped) <= base
    assert CandidateConfig().label("hard") == "hard" and CandidateConfig(pad_to=10).label("hard") == "hard+pad10"
    assert CandidateConfig(max_size=20).label("hard") == "hard<=20"
    assert CandidateConfig(random_size=10).label("random") == "random10"


def test_random_candidates(logs, mined):
    cats = set()
    for s in mined.sessions:
        rnd = random_candidates(s, logs.catalog, SEED, 10)
        assert s.purchased in rnd and len(set(rnd)) == len(rnd) == 10
        cats |= {logs.catalog.by_id[p].category for p in rnd}
        matched = candidate_set("random", s, logs.catalog, SEED, CandidateConfig())
        assert len(matched) == len(hard_candidates(s, logs.catalog, SEED))  # "match": the hard set's size
    assert len(cats) > 3


# -- the benchmark ---------------------------------------------------------------------------------


def test_build_is_deterministic_and_a_larger_sample_extends(data):
    assert _rows(APeB().build(sample=12, seed=SEED, source=None)) == _rows(data)
    assert _rows(APeB().build(sample=12, seed=SEED + 1, source=None)) != _rows(data)
    bigger = APeB().build(sample=14, seed=SEED, source=None)
    assert [asdict(i) for i in bigger.instances[: len(data.instances)]] == _rows(data)[0]


def test_instances_cover_every_cell(data):
    assert len(data.instances) == 12 * 2 * 2
    cells = Counter((i.payload["query_level"], i.payload["candidate_set"]) for i in data.instances)
    assert cells == {(lv, cs): 12 for lv in ("intent", "refined") for cs in ("random", "hard")}
    by_user = {}
    for inst in data.instances:
        lv, cs = inst.payload["query_level"], inst.payload["candidate_set"]
        by_user.setdefault(inst.user_id, {})[(lv, cs)] = inst
        assert inst.instance_id == f"apeb-{inst.user_id}-{lv}-{cs}"
        ids = [c["id"] for c in inst.payload["candidates"]]
        assert inst.gold["purchased"] in ids and inst.group == inst.gold["session"]["category"]
        assert set(inst.payload["candidates"][0]) == {"id", "title", "brand", "price", "category", "attributes"}
        assert inst.public().gold == {}
        assert inst.gold["history_evidence"] and len(inst.gold["history_evidence"]) <= 8
    for cells in by_user.values():
        assert cells[("intent", "hard")].query == cells[("intent", "random")].query \
            == cells[("intent", "hard")].gold["session"]["queries"][0]
        assert cells[("refined", "hard")].query == cells[("refined", "hard")].gold["session"]["queries"][-1]
        hard = {c["id"] for c in cells[("intent", "hard")].payload["candidates"]}
        assert hard == set(cells[("intent", "hard")].gold["session"]["considered"]) | {cells[("intent", "hard")].gold["purchased"]}


def test_documents_are_the_history_only(data):
    starts = {i.user_id: i.gold["session"]["start"] for i in data.instances}
    assert data.documents and all(d.timestamp < starts[d.owner] for d in data.documents)
    texts = [d.text for d in data.documents]
    for prefix in ("viewed: ", "liked: ", "watched video: ", "watched live stream: ", "searched: "):
        assert any(t.startswith(prefix) for t in texts), prefix
    info = data.info
    assert info["sessions_kept"] == info["sessions_used"] == 12 and info["instances"] == 48
    assert info["sessions_found"] > info["sessions_kept"] and info["candidate_sets"] == ["random", "hard"]


def test_params_change_the_construction():
    one = APeB({"query_levels": ["refined"], "candidate_sets": ["hard"], "candidates": {"pad_to": 15}}).build(
        sample=4, seed=1, source=None)
    assert [i.payload["query_level"] for i in one.instances] == ["refined"] * 4
    assert {i.payload["candidate_set"] for i in one.instances} == {"hard+pad15"}
    assert all(len(i.payload["candidates"]) == 15 for i in one.instances)
    assert APeB({"mining": {"delta_minutes": 2}}).build(sample=4, seed=1, source=None).instances == []
    picky = APeB({"mining": {"min_browsed": 100}}).build(sample=4, seed=1, source=None)
    assert picky.info["sessions_kept"] == 0 and picky.info["filtered_few_browsed"] >= 4


def test_bad_params_are_reported():
    with pytest.raises(ConfigError, match="candidate_sets"):
        APeB({"candidate_sets": ["easy"]})
    with pytest.raises(ConfigError, match="canddiates"):
        APeB({"canddiates": {}})
    with pytest.raises(ConfigError, match="query_levels"):
        APeB({"query_levels": ["intent", "intent"]})
    with pytest.raises(ConfigError, match="pad_to"):
        APeB({"candidates": {"pad_to": 20, "max_size": 10}})


def test_dataset_statistics(data):
    tables = APeB().stats(data.instances, data.documents)
    assert set(tables) == {"dataset_by_category", "dataset_by_cell", "dataset_distributions"}
    cat = tables["dataset_by_category"]
    assert cat.loc["Overall", "sessions"] == 12 == cat.drop("Overall")["sessions"].sum()
    assert cat.loc["Overall", "share_%"] == 100.0
    cell = tables["dataset_by_cell"]
    assert list(cell["instances"]) == [12] * 4
    sizes = [len(i.payload["candidates"]) for i in data.instances if i.payload["candidate_set"] == "hard"]
    assert cell.loc[("intent", "hard"), "candidates_max"] == max(sizes)
    dist = tables["dataset_distributions"]
    assert dist.loc["session_minutes", "max"] <= 30 and dist.loc["queries", "min"] >= 2
    assert dist.loc["hard_candidates", "mean"] == pytest.approx(sum(sizes) / len(sizes) * 1.0)


def test_source_path_must_be_a_log_folder(tmp_path):
    from perseval.core.errors import InputError

    with pytest.raises(InputError, match="events.parquet"):
        APeB().build(sample=2, seed=0, source=tmp_path)
    with pytest.raises(InputError, match="not a folder"):
        APeB().build(sample=2, seed=0, source=Path(tmp_path / "nope"))


def test_the_paper_experiment_validates():
    """apeb_paper.yaml: every system of the paper on vLLM with tool calling, 5,648 cases in four cells, the
    rubric judge bound to apeb.rubric."""
    from perseval.experiment.load import load_experiment
    from perseval.pipeline.plan import make_plan
    from tests.conftest import CONFIGS

    exp = load_experiment(experiment_file("apeb_paper"))
    entry = exp.experiment.benchmarks[0]
    assert (entry.name, entry.sample) == ("apeb", 5648) and {"apeb-react", "apeb-vqra", "apeb-pps"} <= set(entry.agents)
    assert {exp.deployments[m].kind for m in exp.experiment.backbones} == {"vllm"}
    assert all(exp.deployments[m].name.endswith("-tools") for m in exp.experiment.backbones)
    assert {j.kind for j in exp.judges.values()} == {"apeb.rubric", "apeb.ranking_strict"}  # strict exactly-5 beside
    assert make_plan(exp).cells
